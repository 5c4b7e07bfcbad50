//go:build amd64 && gc && !purego

#include "textflag.h"

// func poolMaxAVX(dst, src *float32, n int)
//
// VMAXPS returns its second source when either is NaN, which keeps a NaN
// already in dst; a NaN in src is blended in explicitly.
TEXT ·poolMaxAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ AX, AX

maxloop:
	CMPQ      AX, CX
	JGE       maxdone
	VMOVUPS   (SI)(AX*1), Y0      // v
	VMOVUPS   (DI)(AX*1), Y1      // m
	VMAXPS    Y1, Y0, Y2          // v > m ? v : m (m when either is NaN)
	VCMPPS    $3, Y0, Y0, Y3      // v is NaN
	VBLENDVPS Y3, Y0, Y2, Y2
	VMOVUPS   Y2, (DI)(AX*1)
	ADDQ      $32, AX
	JMP       maxloop

maxdone:
	VZEROUPPER
	RET

// func poolAddAVX(dst, src *float32, n int)
TEXT ·poolAddAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ AX, AX

addloop:
	CMPQ    AX, CX
	JGE     adddone
	VMOVUPS (DI)(AX*1), Y0
	VADDPS  (SI)(AX*1), Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     addloop

adddone:
	VZEROUPPER
	RET

// func poolDivAVX(dst *float32, d float32, n int)
TEXT ·poolDivAVX(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	VBROADCASTSS d+8(FP), Y1
	MOVQ         n+16(FP), CX
	SHLQ         $2, CX
	XORQ         AX, AX

divloop:
	CMPQ    AX, CX
	JGE     divdone
	VMOVUPS (DI)(AX*1), Y0
	VDIVPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     divloop

divdone:
	VZEROUPPER
	RET

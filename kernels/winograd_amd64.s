//go:build amd64 && gc && !purego

#include "textflag.h"

// func winoBT4AVX(y0, y1, y2, y3, x0, x1, x2, x3 *float32, n int)
//
// One row (or column) of Bᵀ·d·B over 8 channels per step.
TEXT ·winoBT4AVX(SB), NOSPLIT, $0-72
	MOVQ y0+0(FP), AX
	MOVQ y1+8(FP), BX
	MOVQ y2+16(FP), CX
	MOVQ y3+24(FP), DX
	MOVQ x0+32(FP), SI
	MOVQ x1+40(FP), DI
	MOVQ x2+48(FP), R8
	MOVQ x3+56(FP), R9
	MOVQ n+64(FP), R10
	SHLQ $2, R10               // R10 = n in bytes
	XORQ R11, R11              // R11 = byte offset

bt4loop:
	CMPQ R11, R10
	JGE  bt4done
	VMOVUPS (SI)(R11*1), Y0    // x0
	VMOVUPS (DI)(R11*1), Y1    // x1
	VMOVUPS (R8)(R11*1), Y2    // x2
	VMOVUPS (R9)(R11*1), Y3    // x3
	VSUBPS  Y2, Y0, Y4         // x0 − x2
	VADDPS  Y2, Y1, Y5         // x1 + x2
	VSUBPS  Y1, Y2, Y6         // x2 − x1
	VSUBPS  Y3, Y1, Y7         // x1 − x3
	VMOVUPS Y4, (AX)(R11*1)
	VMOVUPS Y5, (BX)(R11*1)
	VMOVUPS Y6, (CX)(R11*1)
	VMOVUPS Y7, (DX)(R11*1)
	ADDQ    $32, R11
	JMP     bt4loop

bt4done:
	VZEROUPPER
	RET

// func winoAT4AVX(y0, y1, x0, x1, x2, x3, b *float32, n int)
//
// One row (or column) of Aᵀ·M·A plus b over 8 channels per step.
TEXT ·winoAT4AVX(SB), NOSPLIT, $0-64
	MOVQ y0+0(FP), AX
	MOVQ y1+8(FP), BX
	MOVQ x0+16(FP), SI
	MOVQ x1+24(FP), DI
	MOVQ x2+32(FP), R8
	MOVQ x3+40(FP), R9
	MOVQ b+48(FP), CX
	MOVQ n+56(FP), R10
	SHLQ $2, R10
	XORQ R11, R11

at4loop:
	CMPQ R11, R10
	JGE  at4done
	VMOVUPS (SI)(R11*1), Y0    // x0
	VMOVUPS (DI)(R11*1), Y1    // x1
	VMOVUPS (R8)(R11*1), Y2    // x2
	VMOVUPS (R9)(R11*1), Y3    // x3
	VMOVUPS (CX)(R11*1), Y6    // b
	VADDPS  Y1, Y0, Y4         // x0 + x1
	VADDPS  Y2, Y4, Y4         // x0 + x1 + x2
	VADDPS  Y6, Y4, Y4         // … + b
	VSUBPS  Y2, Y1, Y5         // x1 − x2
	VSUBPS  Y3, Y5, Y5         // x1 − x2 − x3
	VADDPS  Y6, Y5, Y5         // … + b
	VMOVUPS Y4, (AX)(R11*1)
	VMOVUPS Y5, (BX)(R11*1)
	ADDQ    $32, R11
	JMP     at4loop

at4done:
	VZEROUPPER
	RET

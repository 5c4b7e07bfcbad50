//go:build amd64 && gc && !purego

#include "textflag.h"

// func packTrans4AVX(dst []float32, ldd int, src []float32, lds int, n int)
//
// Four source rows are read 8 columns at a time and transposed in
// registers: two rounds of unpacks turn 4 rows × 8 columns into 8 groups
// of 4, whose 128-bit halves are stored at the 8 destination rows. The
// next four source rows, which the caller packs next, are prefetched
// alongside: each row is a short run that the hardware prefetcher would
// only pick up after several misses.
TEXT ·packTrans4AVX(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), DX
	SHLQ $2, DX                // DX = destination row stride in bytes
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R8
	SHLQ $2, R8                // R8 = source row stride in bytes
	MOVQ n+64(FP), CX
	LEAQ (R8)(R8*2), R9        // R9 = 3 source rows
	LEAQ (DX)(DX*2), R13       // R13 = 3 destination rows
	LEAQ (SI)(R8*4), R11       // R11 = the next four source rows
	MOVQ CX, R10
	SHRQ $3, R10
	JZ   tail

loop8:
	PREFETCHT0 (R11)
	PREFETCHT0 (R11)(R8*1)
	PREFETCHT0 (R11)(R8*2)
	PREFETCHT0 (R11)(R9*1)
	ADDQ $32, R11
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R9*1), Y3
	VUNPCKLPS Y1, Y0, Y4       // r0c0 r1c0 r0c1 r1c1 | r0c4 r1c4 r0c5 r1c5
	VUNPCKHPS Y1, Y0, Y5       // r0c2 r1c2 r0c3 r1c3 | r0c6 r1c6 r0c7 r1c7
	VUNPCKLPS Y3, Y2, Y6
	VUNPCKHPS Y3, Y2, Y7
	VUNPCKLPD Y6, Y4, Y0       // column 0 | column 4
	VUNPCKHPD Y6, Y4, Y1       // column 1 | column 5
	VUNPCKLPD Y7, Y5, Y2       // column 2 | column 6
	VUNPCKHPD Y7, Y5, Y3       // column 3 | column 7
	LEAQ (DI)(DX*1), BX
	VMOVUPS X0, (DI)
	VMOVUPS X1, (DI)(DX*1)
	VMOVUPS X2, (DI)(DX*2)
	VMOVUPS X3, (DI)(R13*1)
	VEXTRACTF128 $1, Y0, (DI)(DX*4)
	VEXTRACTF128 $1, Y1, (BX)(DX*4)
	VEXTRACTF128 $1, Y2, (DI)(R13*2)
	VEXTRACTF128 $1, Y3, (BX)(R13*2)
	ADDQ $32, SI
	LEAQ (DI)(DX*8), DI
	DECQ R10
	JNZ  loop8

tail:
	ANDQ $7, CX
	JZ   done

loop1:
	MOVL (SI), AX
	MOVL AX, (DI)
	MOVL (SI)(R8*1), AX
	MOVL AX, 4(DI)
	MOVL (SI)(R8*2), AX
	MOVL AX, 8(DI)
	MOVL (SI)(R9*1), AX
	MOVL AX, 12(DI)
	ADDQ $4, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	RET

// func packCopyAVX(dst []float32, ldd int, src []float32, lds int, rows, cols int)
//
// Rows are short (a tile width), so this is a loop of 8-, 4- and 1-wide
// moves per row rather than a call to memmove per row.
TEXT ·packCopyAVX(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), DX
	SHLQ $2, DX
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R8
	SHLQ $2, R8
	MOVQ rows+64(FP), CX
	MOVQ cols+72(FP), R9
	TESTQ CX, CX
	JZ   cdone

crow:
	MOVQ R9, R10
	XORQ BX, BX                // BX = byte offset within the row

c8:
	CMPQ R10, $8
	JLT  c4
	VMOVUPS (SI)(BX*1), Y0
	VMOVUPS Y0, (DI)(BX*1)
	ADDQ $32, BX
	SUBQ $8, R10
	JMP  c8

c4:
	CMPQ R10, $4
	JLT  c1
	VMOVUPS (SI)(BX*1), X0
	VMOVUPS X0, (DI)(BX*1)
	ADDQ $16, BX
	SUBQ $4, R10

c1:
	TESTQ R10, R10
	JZ   cnext
	MOVL (SI)(BX*1), AX
	MOVL AX, (DI)(BX*1)
	ADDQ $4, BX
	DECQ R10
	JMP  c1

cnext:
	ADDQ R8, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  crow

cdone:
	VZEROUPPER
	RET

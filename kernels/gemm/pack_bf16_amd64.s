//go:build amd64 && gc && !purego

#include "textflag.h"

// Both routines widen bfloat16 to float32 with VPMOVZXWD (8 halfwords to 8
// zero-extended doublewords) and VPSLLD $16: the bits land in the upper
// half, which is the float32 they stand for, exactly.

// func packTrans4BF16AVX2(dst []float32, ldd int, src []uint16, lds int, n int)
//
// packTrans4AVX with widened loads: four source rows are read 8 columns
// (16 bytes) at a time, widened, and transposed in registers by two rounds
// of unpacks into 8 groups of 4, whose 128-bit halves are stored at the 8
// destination rows. The next four source rows, which the caller packs
// next, are prefetched a cache line at a time, every fourth step.
TEXT ·packTrans4BF16AVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), DX
	SHLQ $2, DX                // DX = destination row stride in bytes
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R8
	SHLQ $1, R8                // R8 = source row stride in bytes
	MOVQ n+64(FP), CX
	LEAQ (R8)(R8*2), R9        // R9 = 3 source rows
	LEAQ (DX)(DX*2), R13       // R13 = 3 destination rows
	LEAQ (SI)(R8*4), R11       // R11 = the next four source rows
	XORQ R12, R12              // R12 = steps since the last prefetch
	MOVQ CX, R10
	SHRQ $3, R10
	JZ   tail

loop8:
	TESTQ $3, R12
	JNZ  load
	PREFETCHT0 (R11)
	PREFETCHT0 (R11)(R8*1)
	PREFETCHT0 (R11)(R8*2)
	PREFETCHT0 (R11)(R9*1)
	ADDQ $64, R11

load:
	INCQ R12
	VPMOVZXWD (SI), Y0
	VPMOVZXWD (SI)(R8*1), Y1
	VPMOVZXWD (SI)(R8*2), Y2
	VPMOVZXWD (SI)(R9*1), Y3
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VPSLLD $16, Y2, Y2
	VPSLLD $16, Y3, Y3
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
	ADDQ $16, SI
	LEAQ (DI)(DX*8), DI
	DECQ R10
	JNZ  loop8

tail:
	ANDQ $7, CX
	JZ   done

loop1:
	MOVWLZX (SI), AX
	SHLL $16, AX
	MOVL AX, (DI)
	MOVWLZX (SI)(R8*1), AX
	SHLL $16, AX
	MOVL AX, 4(DI)
	MOVWLZX (SI)(R8*2), AX
	SHLL $16, AX
	MOVL AX, 8(DI)
	MOVWLZX (SI)(R9*1), AX
	SHLL $16, AX
	MOVL AX, 12(DI)
	ADDQ $2, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	RET

// func packCopyBF16AVX2(dst []float32, ldd int, src []uint16, lds int, rows, cols int)
//
// packCopyAVX with widened loads. BX is the byte offset in the source row;
// the destination's is twice that.
TEXT ·packCopyBF16AVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), DX
	SHLQ $2, DX
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R8
	SHLQ $1, R8
	MOVQ rows+64(FP), CX
	MOVQ cols+72(FP), R9
	TESTQ CX, CX
	JZ   cdone

crow:
	MOVQ R9, R10
	XORQ BX, BX

c8:
	CMPQ R10, $8
	JLT  c4
	VPMOVZXWD (SI)(BX*1), Y0
	VPSLLD $16, Y0, Y0
	VMOVUPS Y0, (DI)(BX*2)
	ADDQ $16, BX
	SUBQ $8, R10
	JMP  c8

c4:
	CMPQ R10, $4
	JLT  c1
	VPMOVZXWD (SI)(BX*1), X0
	VPSLLD $16, X0, X0
	VMOVUPS X0, (DI)(BX*2)
	ADDQ $8, BX
	SUBQ $4, R10

c1:
	TESTQ R10, R10
	JZ   cnext
	MOVWLZX (SI)(BX*1), AX
	SHLL $16, AX
	MOVL AX, (DI)(BX*2)
	ADDQ $2, BX
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

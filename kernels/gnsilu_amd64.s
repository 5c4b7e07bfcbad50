//go:build amd64 && gc && !purego

#include "textflag.h"

// Constants of siluAffineAVX2, as float32 bits (127 as an int32): the
// values actExp2f and sigmoidBlock use, so the result matches them bit for
// bit.
DATA silucst<>+0(SB)/4, $0xbfb8aa3b  // −log₂e
DATA silucst<>+4(SB)/4, $0xc2fc0000  // −126
DATA silucst<>+8(SB)/4, $0x42fc0000  // 126
DATA silucst<>+12(SB)/4, $0x4b400000 // 1.5·2²³ (rounds to an integer)
DATA silucst<>+16(SB)/4, $0x3f800000 // 1
DATA silucst<>+20(SB)/4, $0x0000007f // 127, the exponent bias
DATA silucst<>+24(SB)/4, $0x3f317217 // actP1
DATA silucst<>+28(SB)/4, $0x3e75fd27 // actP2
DATA silucst<>+32(SB)/4, $0x3d635937 // actP3
DATA silucst<>+36(SB)/4, $0x3c1e5f2c // actP4
DATA silucst<>+40(SB)/4, $0x3aaec3ef // actP5
GLOBL silucst<>(SB), RODATA|NOPTR, $44

// func siluAffineAVX2(y, x, m, s, b *float32, n int)
//
// z = (x − m)·s + b, then y = z / (1 + 2^t) with t = −log₂e·z clamped to
// ±126 and 2^t = 2ⁿ·(1 + q) as in actExp2f; 8 elements per step.
TEXT ·siluAffineAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ m+16(FP), DI
	MOVQ s+24(FP), R8
	MOVQ b+32(FP), R9
	MOVQ n+40(FP), R10
	SHLQ $2, R10
	XORQ R11, R11
	VBROADCASTSS silucst<>+0(SB), Y9   // −log₂e
	VBROADCASTSS silucst<>+4(SB), Y10  // −126
	VBROADCASTSS silucst<>+8(SB), Y11  // 126
	VBROADCASTSS silucst<>+12(SB), Y12 // rounding constant
	VBROADCASTSS silucst<>+16(SB), Y13 // 1
	VBROADCASTSS silucst<>+20(SB), Y14 // 127
	VBROADCASTSS silucst<>+40(SB), Y15 // P5

siluloop:
	CMPQ R11, R10
	JGE  siludone
	VMOVUPS (SI)(R11*1), Y0
	VSUBPS  (DI)(R11*1), Y0, Y0        // x − m
	VMULPS  (R8)(R11*1), Y0, Y0        // ·s
	VADDPS  (R9)(R11*1), Y0, Y0        // + b = z
	VMULPS  Y0, Y9, Y4                 // t = −log₂e·z
	VMAXPS  Y4, Y10, Y4                // max(−126, t), NaN kept
	VMINPS  Y4, Y11, Y4                // min(126, t), NaN kept
	VADDPS  Y12, Y4, Y5                // f = t + 1.5·2²³
	VSUBPS  Y12, Y5, Y6                // f − 1.5·2²³ = round(t)
	VSUBPS  Y6, Y4, Y6                 // r = t − round(t)
	VPADDD  Y14, Y5, Y7
	VPSLLD  $23, Y7, Y7                // 2ⁿ
	VMULPS  Y15, Y6, Y8                // r·P5
	VBROADCASTSS silucst<>+36(SB), Y1
	VADDPS  Y8, Y1, Y8                 // P4 + …
	VMULPS  Y8, Y6, Y8
	VBROADCASTSS silucst<>+32(SB), Y1
	VADDPS  Y8, Y1, Y8                 // P3 + …
	VMULPS  Y8, Y6, Y8
	VBROADCASTSS silucst<>+28(SB), Y1
	VADDPS  Y8, Y1, Y8                 // P2 + …
	VMULPS  Y8, Y6, Y8
	VBROADCASTSS silucst<>+24(SB), Y1
	VADDPS  Y8, Y1, Y8                 // P1 + …
	VMULPS  Y8, Y6, Y8                 // q
	VADDPS  Y8, Y13, Y8                // 1 + q
	VMULPS  Y8, Y7, Y8                 // 2ⁿ·(1 + q)
	VADDPS  Y8, Y13, Y8                // 1 + e^−z
	VDIVPS  Y8, Y0, Y2                 // z / (1 + e^−z)
	VMOVUPS Y2, (AX)(R11*1)
	ADDQ    $32, R11
	JMP     siluloop

siludone:
	VZEROUPPER
	RET

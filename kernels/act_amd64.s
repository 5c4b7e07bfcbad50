//go:build amd64 && gc && !purego

#include "textflag.h"

// Constants of the AVX2 activation and softmax loops, as float32 bits (or
// int32): the very values the Go loops round their constants to, so that
// the results match them bit for bit.
DATA actcst<>+0(SB)/4, $0xc0135761  // geluA = −2·√(2/π)·log₂e
DATA actcst<>+4(SB)/4, $0xbdd2d3e8  // geluB = −2·√(2/π)·0.044715·log₂e
DATA actcst<>+8(SB)/4, $0xc2fc0000  // −126
DATA actcst<>+12(SB)/4, $0x42fc0000 // 126
DATA actcst<>+16(SB)/4, $0x4b400000 // 1.5·2²³ (rounds to an integer)
DATA actcst<>+20(SB)/4, $0x3f800000 // 1
DATA actcst<>+24(SB)/4, $0x0000007f // 127, the exponent bias
DATA actcst<>+28(SB)/4, $0x3f317217 // actP1
DATA actcst<>+32(SB)/4, $0x3e75fd27 // actP2
DATA actcst<>+36(SB)/4, $0x3d635937 // actP3
DATA actcst<>+40(SB)/4, $0x3c1e5f2c // actP4
DATA actcst<>+44(SB)/4, $0x3aaec3ef // actP5
DATA actcst<>+48(SB)/4, $0x3f000000 // ½
DATA actcst<>+52(SB)/4, $0x3f4c422a // geluK = √(2/π)
DATA actcst<>+56(SB)/4, $0x3e095d4f // 3·0.044715
DATA actcst<>+60(SB)/4, $0xc2ae0000 // exp32Lo = −87
DATA actcst<>+64(SB)/4, $0x42b8aa3b // exp32Scale = 64/ln2
DATA actcst<>+68(SB)/4, $0x3c316000 // exp32Ln2Hi
DATA actcst<>+72(SB)/4, $0x3690bfbf // exp32Ln2Lo
DATA actcst<>+76(SB)/4, $0x0000003f // 63, the table index mask
DATA actcst<>+80(SB)/4, $0xbfb8aa3b // −log₂e
GLOBL actcst<>(SB), RODATA|NOPTR, $84

// EXP2 sets Y5 = 2^z = 2ⁿ·(1 + q) for z in Y1, as actExp2f does (z
// clamped to ±126, the polynomial's products rounded one by one), with
// Y10–Y15 and Y7 holding the constants the loops below broadcast;
// Y2–Y4 and Y6 are scratch.
#define EXP2 \
	VMAXPS  Y1, Y10, Y1 \ // max(−126, z), NaN kept
	VMINPS  Y1, Y11, Y1 \ // min(126, z), NaN kept
	VADDPS  Y12, Y1, Y2 \ // t = z + 1.5·2²³
	VSUBPS  Y12, Y2, Y3 \ // t − 1.5·2²³ = round(z)
	VSUBPS  Y3, Y1, Y3 \ // r = z − round(z)
	VPADDD  Y14, Y2, Y4 \
	VPSLLD  $23, Y4, Y4 \ // s = 2ⁿ
	VMULPS  Y15, Y3, Y5 \ // r·P5
	VADDPS  Y5, Y7, Y5 \ // P4 + …
	VMULPS  Y5, Y3, Y5 \
	VBROADCASTSS actcst<>+36(SB), Y6 \
	VADDPS  Y5, Y6, Y5 \ // P3 + …
	VMULPS  Y5, Y3, Y5 \
	VBROADCASTSS actcst<>+32(SB), Y6 \
	VADDPS  Y5, Y6, Y5 \ // P2 + …
	VMULPS  Y5, Y3, Y5 \
	VBROADCASTSS actcst<>+28(SB), Y6 \
	VADDPS  Y5, Y6, Y5 \ // P1 + …
	VMULPS  Y5, Y3, Y5 \ // q
	VADDPS  Y5, Y13, Y5 \ // 1 + q
	VMULPS  Y5, Y4, Y5 // s·(1 + q)

// func geluAVX2(y, x *float32, n int)
//
// f = x, z = f·(geluA + geluB·f·f), clamped to ±126, 2^z = 2ⁿ·(1 + q) as in
// actExp2f, y = f / (1 + 2^z); 8 elements per step, no FMA (the Go loop
// rounds every product).
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ DX, DX
	VBROADCASTSS actcst<>+0(SB), Y8   // geluA
	VBROADCASTSS actcst<>+4(SB), Y9   // geluB
	VBROADCASTSS actcst<>+8(SB), Y10  // −126
	VBROADCASTSS actcst<>+12(SB), Y11 // 126
	VBROADCASTSS actcst<>+16(SB), Y12 // rounding constant
	VBROADCASTSS actcst<>+20(SB), Y13 // 1
	VBROADCASTSS actcst<>+24(SB), Y14 // 127
	VBROADCASTSS actcst<>+44(SB), Y15 // P5
	VBROADCASTSS actcst<>+40(SB), Y7  // P4

geluloop:
	CMPQ DX, CX
	JGE  geludone
	VMOVUPS (SI)(DX*1), Y0            // f
	VMULPS  Y0, Y9, Y1                // geluB·f
	VMULPS  Y0, Y1, Y1                // ·f
	VADDPS  Y1, Y8, Y1                // geluA + …
	VMULPS  Y1, Y0, Y1                // z = f·(…)
	EXP2
	VADDPS  Y5, Y13, Y5               // 1 + e^{−2u}
	VDIVPS  Y5, Y0, Y6                // f / (…)
	VMOVUPS Y6, (AX)(DX*1)
	ADDQ    $32, DX
	JMP     geluloop

geludone:
	VZEROUPPER
	RET

// func geluBackOutAVX2(dx, dy, x, y *float32, n int)
//
// sg = y/x (½ where x = 0), dx = dy·(sg + 2x·(1 − sg)·sg·geluK·(1 +
// 3·0.044715·x·x)), products in the Go loop's order; 8 elements per step.
TEXT ·geluBackOutAVX2(SB), NOSPLIT, $0-40
	MOVQ dx+0(FP), AX
	MOVQ dy+8(FP), BX
	MOVQ x+16(FP), SI
	MOVQ y+24(FP), DI
	MOVQ n+32(FP), CX
	SHLQ $2, CX
	XORQ DX, DX
	VBROADCASTSS actcst<>+20(SB), Y13 // 1
	VBROADCASTSS actcst<>+48(SB), Y12 // ½
	VBROADCASTSS actcst<>+52(SB), Y11 // geluK
	VBROADCASTSS actcst<>+56(SB), Y10 // 3·0.044715
	VXORPS       Y9, Y9, Y9           // 0

gbackloop:
	CMPQ DX, CX
	JGE  gbackdone
	VMOVUPS   (SI)(DX*1), Y0          // v = x
	VMOVUPS   (DI)(DX*1), Y1          // y
	VDIVPS    Y0, Y1, Y2              // y / v
	VCMPPS    $0, Y9, Y0, Y3          // v == 0 (false for NaN, as v != 0 is true)
	VBLENDVPS Y3, Y12, Y2, Y2         // sg
	VADDPS    Y0, Y0, Y4              // 2v
	VSUBPS    Y2, Y13, Y5             // 1 − sg
	VMULPS    Y5, Y4, Y4              // 2v·(1 − sg)
	VMULPS    Y2, Y4, Y4              // ·sg
	VMULPS    Y11, Y4, Y4             // ·geluK
	VMULPS    Y0, Y10, Y5             // 3·0.044715·v
	VMULPS    Y0, Y5, Y5              // ·v
	VADDPS    Y5, Y13, Y5             // 1 + …
	VMULPS    Y5, Y4, Y4              // (…)·(1 + …)
	VADDPS    Y4, Y2, Y4              // sg + …
	VMULPS    (BX)(DX*1), Y4, Y4      // dy·(…)
	VMOVUPS   Y4, (AX)(DX*1)
	ADDQ      $32, DX
	JMP       gbackloop

gbackdone:
	VZEROUPPER
	RET

// func expShiftAVX2(row *float32, n int, shift float32, acc *[8]float32)
//
// row[i] = exp32(row[i] − shift) for i < n (a multiple of 8), bit for bit
// as the Go exp32 (table lookups by VPGATHERDD), and acc[lane] = the sum of
// the lane's results.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ acc+24(FP), DI
	SHLQ $2, CX
	XORQ DX, DX
	LEAQ ·exp32Table(SB), BX
	VBROADCASTSS shift+16(FP), Y15
	VBROADCASTSS actcst<>+60(SB), Y14 // −87
	VBROADCASTSS actcst<>+64(SB), Y13 // 64/ln2
	VBROADCASTSS actcst<>+16(SB), Y12 // 1.5·2²³
	VBROADCASTSS actcst<>+68(SB), Y11 // ln2/64 high part
	VBROADCASTSS actcst<>+72(SB), Y10 // ln2/64 low part
	VBROADCASTSS actcst<>+48(SB), Y9  // ½
	VBROADCASTSS actcst<>+20(SB), Y8  // 1
	VBROADCASTSS actcst<>+76(SB), Y7  // 63
	VXORPS       Y6, Y6, Y6           // sums

exploop:
	CMPQ DX, CX
	JGE  expdone
	VMOVUPS    (SI)(DX*1), Y0
	VSUBPS     Y15, Y0, Y0            // x = row − shift
	VCMPPS     $1, Y14, Y0, Y5        // x < −87: the result is 0
	VMULPS     Y13, Y0, Y1            // x·64/ln2
	VADDPS     Y12, Y1, Y1            // k = … + 1.5·2²³
	VSUBPS     Y12, Y1, Y1            // kf = k − 1.5·2²³
	VMULPS     Y11, Y1, Y2            // kf·ln2hi
	VSUBPS     Y2, Y0, Y2             // r = x − …
	VMULPS     Y10, Y1, Y3            // kf·ln2lo
	VSUBPS     Y3, Y2, Y2             // r −= …
	VMULPS     Y9, Y2, Y3             // ½r
	VADDPS     Y8, Y3, Y3             // + 1
	VMULPS     Y2, Y3, Y3             // ·r
	VADDPS     Y8, Y3, Y3             // p = … + 1
	VCVTTPS2DQ Y1, Y1                 // ki = int32(kf)
	VPAND      Y7, Y1, Y2             // ki & 63
	VPSRAD     $6, Y1, Y1
	VPSLLD     $23, Y1, Y1            // (ki >> 6) << 23
	VPCMPEQD   Y4, Y4, Y4             // gather every lane
	VPXOR      Y0, Y0, Y0
	VPGATHERDD Y4, (BX)(Y2*4), Y0     // table bits
	VPADDD     Y1, Y0, Y0             // 2^(ki/64)
	VMULPS     Y0, Y3, Y0             // p·2^(ki/64)
	VANDNPS    Y0, Y5, Y0             // 0 below −87
	VMOVUPS    Y0, (SI)(DX*1)
	VADDPS     Y0, Y6, Y6
	ADDQ       $32, DX
	JMP        exploop

expdone:
	VMOVUPS Y6, (DI)
	VZEROUPPER
	RET

// func rowMaxAVX2(row *float32, n int) float32
//
// The largest of row[0..n), n a positive multiple of 8.
TEXT ·rowMaxAVX2(SB), NOSPLIT, $0-20
	MOVQ    row+0(FP), SI
	MOVQ    n+8(FP), CX
	SHLQ    $2, CX
	VMOVUPS (SI), Y0
	MOVQ    $32, DX

maxloop:
	CMPQ   DX, CX
	JGE    maxdone
	VMAXPS (SI)(DX*1), Y0, Y0
	ADDQ   $32, DX
	JMP    maxloop

maxdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	MOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func softmaxGradAVX2(ds, p *float32, n int, delta float32)
//
// ds[i] = p[i]·(ds[i] − delta) for i < n, a multiple of 8.
TEXT ·softmaxGradAVX2(SB), NOSPLIT, $0-28
	MOVQ         ds+0(FP), AX
	MOVQ         p+8(FP), SI
	MOVQ         n+16(FP), CX
	SHLQ         $2, CX
	XORQ         DX, DX
	VBROADCASTSS delta+24(FP), Y15

sgradloop:
	CMPQ    DX, CX
	JGE     sgraddone
	VMOVUPS (AX)(DX*1), Y0
	VSUBPS  Y15, Y0, Y0
	VMULPS  (SI)(DX*1), Y0, Y0
	VMOVUPS Y0, (AX)(DX*1)
	ADDQ    $32, DX
	JMP     sgradloop

sgraddone:
	VZEROUPPER
	RET

// func sigmoidAVX2(y, x *float32, n int, silu bool)
//
// f = x, z = −log₂e·f clamped to ±126, 2^z = 2ⁿ·(1 + q) as in actExp2f,
// y = f / (1 + 2^z) with silu, else 1 / (1 + 2^z); 8 elements per step,
// no FMA (the Go loop rounds every product).
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-25
	MOVQ y+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBQZX silu+24(FP), BX
	SHLQ $2, CX
	XORQ DX, DX
	VBROADCASTSS actcst<>+80(SB), Y8  // −log₂e
	VBROADCASTSS actcst<>+8(SB), Y10  // −126
	VBROADCASTSS actcst<>+12(SB), Y11 // 126
	VBROADCASTSS actcst<>+16(SB), Y12 // rounding constant
	VBROADCASTSS actcst<>+20(SB), Y13 // 1
	VBROADCASTSS actcst<>+24(SB), Y14 // 127
	VBROADCASTSS actcst<>+44(SB), Y15 // P5
	VBROADCASTSS actcst<>+40(SB), Y7  // P4
	VMOVUPS Y13, Y9                   // the numerator: 1, or f with silu

sigloop:
	CMPQ DX, CX
	JGE  sigdone
	VMOVUPS (SI)(DX*1), Y0            // f
	TESTQ   BX, BX
	JZ      signum
	VMOVUPS Y0, Y9

signum:
	VMULPS  Y0, Y8, Y1                // z = −log₂e·f
	EXP2
	VADDPS  Y5, Y13, Y5               // 1 + e^{−f}
	VDIVPS  Y5, Y9, Y6                // numerator / (…)
	VMOVUPS Y6, (AX)(DX*1)
	ADDQ    $32, DX
	JMP     sigloop

sigdone:
	VZEROUPPER
	RET

//go:build amd64 && gc && !purego

#include "textflag.h"

// The AdamW kernels follow adamwGeneric operation for operation (separate
// multiply and add, true square root and division, never FMA) so that the
// assembly and the pure-Go loop give the same bits. The loops are memory
// bound: 28 bytes move per element against a handful of vector operations.

// func adamwAVX512(p, grad, m, v *float32, n int, k *AdamWScalars)
TEXT ·adamwAVX512(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Z16  // decay
	VBROADCASTSS 4(AX), Z17  // beta1
	VBROADCASTSS 8(AX), Z18  // 1 - beta1
	VBROADCASTSS 12(AX), Z19 // beta2
	VBROADCASTSS 16(AX), Z20 // 1 - beta2
	VBROADCASTSS 20(AX), Z21 // sqrt(1 - beta2^t)
	VBROADCASTSS 24(AX), Z22 // eps
	VBROADCASTSS 28(AX), Z23 // -lr / (1 - beta1^t)
	XORQ BX, BX
	SHRQ $4, CX
	JZ   adamw512done

adamw512loop:
	VMOVUPS (SI)(BX*1), Z0      // g
	VMULPS  (DX)(BX*1), Z17, Z1 // beta1*m
	VMULPS  Z0, Z18, Z2         // (1-beta1)*g
	VADDPS  Z2, Z1, Z1          // m
	VMOVUPS Z1, (DX)(BX*1)
	VMULPS  (R8)(BX*1), Z19, Z3 // beta2*v
	VMULPS  Z0, Z20, Z4         // (1-beta2)*g
	VMULPS  Z0, Z4, Z4          // ((1-beta2)*g)*g
	VADDPS  Z4, Z3, Z3          // v
	VMOVUPS Z3, (R8)(BX*1)
	VSQRTPS Z3, Z3
	VDIVPS  Z21, Z3, Z3         // sqrt(v) / sqrt(bc2)
	VADDPS  Z22, Z3, Z3         // denominator
	VMULPS  (DI)(BX*1), Z16, Z5 // p*decay
	VMULPS  Z1, Z23, Z1         // -step*m
	VDIVPS  Z3, Z1, Z1          // (-step*m) / denominator
	VADDPS  Z1, Z5, Z5
	VMOVUPS Z5, (DI)(BX*1)
	ADDQ    $64, BX
	DECQ    CX
	JNZ     adamw512loop

adamw512done:
	VZEROUPPER
	RET

// func adamwAVX2(p, grad, m, v *float32, n int, k *AdamWScalars)
TEXT ·adamwAVX2(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Y8   // decay
	VBROADCASTSS 4(AX), Y9   // beta1
	VBROADCASTSS 8(AX), Y10  // 1 - beta1
	VBROADCASTSS 12(AX), Y11 // beta2
	VBROADCASTSS 16(AX), Y12 // 1 - beta2
	VBROADCASTSS 20(AX), Y13 // sqrt(1 - beta2^t)
	VBROADCASTSS 24(AX), Y14 // eps
	VBROADCASTSS 28(AX), Y15 // -lr / (1 - beta1^t)
	XORQ BX, BX
	SHRQ $3, CX
	JZ   adamw2done

adamw2loop:
	VMOVUPS (SI)(BX*1), Y0
	VMULPS  (DX)(BX*1), Y9, Y1
	VMULPS  Y0, Y10, Y2
	VADDPS  Y2, Y1, Y1
	VMOVUPS Y1, (DX)(BX*1)
	VMULPS  (R8)(BX*1), Y11, Y3
	VMULPS  Y0, Y12, Y4
	VMULPS  Y0, Y4, Y4
	VADDPS  Y4, Y3, Y3
	VMOVUPS Y3, (R8)(BX*1)
	VSQRTPS Y3, Y3
	VDIVPS  Y13, Y3, Y3
	VADDPS  Y14, Y3, Y3
	VMULPS  (DI)(BX*1), Y8, Y5
	VMULPS  Y1, Y15, Y1
	VDIVPS  Y3, Y1, Y1
	VADDPS  Y1, Y5, Y5
	VMOVUPS Y5, (DI)(BX*1)
	ADDQ    $32, BX
	DECQ    CX
	JNZ     adamw2loop

adamw2done:
	VZEROUPPER
	RET

// func emaAVX512(e, p *float32, n int, decay, rest float32)
TEXT ·emaAVX512(SB), NOSPLIT, $0-32
	MOVQ e+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS decay+24(FP), Z16
	VBROADCASTSS rest+28(FP), Z17
	SHRQ $4, CX
	JZ   ema512done

ema512loop:
	VMULPS  (DI), Z16, Z0
	VMULPS  (SI), Z17, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	DECQ    CX
	JNZ     ema512loop

ema512done:
	VZEROUPPER
	RET

// func emaAVX2(e, p *float32, n int, decay, rest float32)
TEXT ·emaAVX2(SB), NOSPLIT, $0-32
	MOVQ e+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS decay+24(FP), Y8
	VBROADCASTSS rest+28(FP), Y9
	SHRQ $3, CX
	JZ   ema2done

ema2loop:
	VMULPS  (DI), Y8, Y0
	VMULPS  (SI), Y9, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	DECQ    CX
	JNZ     ema2loop

ema2done:
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, n int, s float32)
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Z16
	SHRQ $4, CX
	JZ   scale512done

scale512loop:
	VMULPS  (DI), Z16, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	DECQ    CX
	JNZ     scale512loop

scale512done:
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, s float32)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y8
	SHRQ $3, CX
	JZ   scale2done

scale2loop:
	VMULPS  (DI), Y8, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     scale2loop

scale2done:
	VZEROUPPER
	RET

// Sums of squares widen to float64 before squaring: float32 running sums
// over millions of terms would lose the small gradients.

// func sumSquaresAVX512(x *float32, n int, acc *[8]float64)
TEXT ·sumSquaresAVX512(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	MOVQ   acc+16(FP), DI
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	SHRQ   $5, CX
	JZ     sq512done

sq512loop:
	VCVTPS2PD   0(SI), Z4
	VCVTPS2PD   32(SI), Z5
	VCVTPS2PD   64(SI), Z6
	VCVTPS2PD   96(SI), Z7
	VFMADD231PD Z4, Z4, Z0
	VFMADD231PD Z5, Z5, Z1
	VFMADD231PD Z6, Z6, Z2
	VFMADD231PD Z7, Z7, Z3
	ADDQ        $128, SI
	DECQ        CX
	JNZ         sq512loop

sq512done:
	VADDPD  Z1, Z0, Z0
	VADDPD  Z3, Z2, Z2
	VADDPD  Z2, Z0, Z0
	VMOVUPD Z0, (DI)
	VZEROUPPER
	RET

// func sumSquaresAVX2(x *float32, n int, acc *[8]float64)
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	MOVQ   acc+16(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	SHRQ   $4, CX
	JZ     sq2done

sq2loop:
	VCVTPS2PD   0(SI), Y4
	VCVTPS2PD   16(SI), Y5
	VCVTPS2PD   32(SI), Y6
	VCVTPS2PD   48(SI), Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ        $64, SI
	DECQ        CX
	JNZ         sq2loop

sq2done:
	VADDPD  Y1, Y0, Y0
	VADDPD  Y3, Y2, Y2
	VADDPD  Y2, Y0, Y0
	VMOVUPD Y0, (DI)
	VZEROUPPER
	RET

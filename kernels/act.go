package kernels

import (
	"math"
	"unsafe"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// The tanh-approximated GELU of PyTorch (approximate="tanh"), DiT's MLP
// activation: GELU(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
const (
	geluK = math.Sqrt2 / math.SqrtPi // √(2/π), exact in constant arithmetic
	geluC = 0.044715
)

// actGrain is the smallest parallel chunk of an activation: they cost
// several nanoseconds per element, so fewer elements than the memory-bound
// grain already repay a goroutine.
const actGrain = 1 << 13

// Every activation reduces to e^t = 2^z with z = t·log₂e, split as
// z = n + r with n = round(z), |r| ≤ ½, so that 2^z = 2ⁿ·(1 + q) with
// q = 2^r − 1 = r·P(r). Keeping 2ⁿ and q apart gives exp (s·(1 + q)) and
// expm1 (s·q + (s − 1)) both to full relative accuracy; the latter has no
// cancellation near 0, which tanh needs.
//
// float32: P is a minimax fit of (2^r − 1)/r on [−½, ½] for relative
// error (Remez exchange). The exponential itself uses degree 4 (2^r within
// 1.8e-7, about two float32 ulps; ~20 scalar instructions, inlined into the
// element loops, 10% faster than degree 5); tanh, which needs q = expm1
// itself to full relative accuracy near 0, uses degree 5 (1.1e-8). float64
// (references and gradient checks) uses the Taylor series to degree 13
// (truncation < 5e-18).
const (
	actP1 = 0.6931471435061685
	actP2 = 0.24022351343148554
	actP3 = 0.05550500213526927
	actP4 = 0.0096662454247513
	actP5 = 0.001333353869026347

	actQ1 = 0.6931471879266923
	actQ2 = 0.24022649794966708
	actQ3 = 0.05550357433635136
	actQ4 = 0.009618237493690219
	actQ5 = 0.0013390735478150057
	actQ6 = 0.00015403512774175084

	actT1  = math.Ln2
	actT2  = actT1 * math.Ln2 / 2
	actT3  = actT2 * math.Ln2 / 3
	actT4  = actT3 * math.Ln2 / 4
	actT5  = actT4 * math.Ln2 / 5
	actT6  = actT5 * math.Ln2 / 6
	actT7  = actT6 * math.Ln2 / 7
	actT8  = actT7 * math.Ln2 / 8
	actT9  = actT8 * math.Ln2 / 9
	actT10 = actT9 * math.Ln2 / 10
	actT11 = actT10 * math.Ln2 / 11
	actT12 = actT11 * math.Ln2 / 12
	actT13 = actT12 * math.Ln2 / 13

	// Adding 1.5·2^23 (2^52) rounds a float32 (float64) of magnitude below
	// 2^22 to an integer, which then sits in the low mantissa bits.
	actRound32 = 0x1.8p23
	actRound64 = 0x1.8p52
)

// actExp2f returns s = 2ⁿ and q = 2^r − 1 with n + r = z, n = round(z),
// for float32, so that 2^z = s·(1 + q). z is clamped to ±126 so that s
// stays a normal float32: e^t then saturates at about 1.2e38 instead of
// overflowing, which keeps σ = 1/(1 + e^t) and x/(1 + e^t) free of Inf/Inf.
// NaN propagates through r. Small enough to be inlined.
func actExp2f(z float32) (s, q float32) {
	s, r := actSplit2f(z)
	return s, r * (actP1 + r*(actP2+r*(actP3+r*(actP4+r*actP5))))
}

// actExpm1Polyf returns q = 2^r − 1 for |r| ≤ ½ to full float32 relative
// precision (degree 5), for expm1 = s·q + (s − 1) in tanh.
func actExpm1Polyf(r float32) float32 {
	return r * (actQ1 + r*(actQ2+r*(actQ3+r*(actQ4+r*(actQ5+r*actQ6)))))
}

// actSplit2f returns s = 2ⁿ and r = z − n for n = round(z), z clamped to
// ±126.
func actSplit2f(z float32) (s, r float32) {
	if z < -126 {
		z = -126
	}
	if z > 126 {
		z = 126
	}
	f := z + actRound32
	r = z - (f - actRound32)
	// The low mantissa bits of f hold n; shifting them into the exponent
	// field drops the rest of f's bits.
	s = math.Float32frombits((math.Float32bits(f) + 127) << 23)
	return s, r
}

// actExp2d is actExp2f for float64 (z clamped to ±1022).
func actExp2d(z float64) (s, q float64) {
	if z < -1022 {
		z = -1022
	}
	if z > 1022 {
		z = 1022
	}
	f := z + actRound64
	r := z - (f - actRound64)
	s = math.Float64frombits((math.Float64bits(f) + 1023) << 52)
	q = r * (actT1 + r*(actT2+r*(actT3+r*(actT4+r*(actT5+r*(actT6+r*(actT7+
		r*(actT8+r*(actT9+r*(actT10+r*(actT11+r*(actT12+r*actT13))))))))))))
	return s, q
}

// actPrecise reports whether T is float64. The compiler folds it per
// instantiation, so each kernel's float32 loop carries no float64 code.
func actPrecise[T gemm.Float]() bool {
	var zero T
	return unsafe.Sizeof(zero) == 8
}

// actBackClamp bounds z in backward passes, where e^t multiplies
// σ² = 1/(1 + e^t)²: with z ≤ 100 (float32) or 1000 (float64), σ stays a
// normal number and e^t·σ·σ cannot become Inf·0.
const (
	actBackClamp32 = 100
	actBackClamp64 = 1000
)

// The GELU exponent: e^{−2u} = 2^z with z = x·(geluA + geluB·x²).
const (
	geluA = -2 * geluK * math.Log2E
	geluB = -2 * geluK * geluC * math.Log2E
)

// Each activation below is a parallel loop over a block function holding
// two element loops, float64 and float32, of the same formula; only the
// one matching T survives compilation.

// TanhForward sets y = tanh(x) elementwise, to a few ulps of relative error
// over the whole range: tanh(x) = −m/(2 + m) with m = expm1(−2x) has no
// cancellation near 0, unlike 1 − 2/(e^{2x} + 1). y may alias x.
func TanhForward[T gemm.Float](y, x []T) {
	ewNeedLen("TanhForward", "x", len(x), len(y))
	parallel.For(len(y), actGrain, func(lo, hi int) { tanhBlock(y[lo:hi], x[lo:hi]) })
}

// tanhClamp bounds |z| = 2|x|·log₂e: beyond |x| ≈ 20.8, tanh is ±1 even in
// float64, and a finite m keeps m/(2 + m) from being Inf/Inf.
const tanhClamp = 60

func tanhBlock[T gemm.Float](y, x []T) {
	x = x[:len(y)]
	if actPrecise[T]() {
		for i, v := range x {
			z := min(tanhClamp, max(-tanhClamp, -2*math.Log2E*float64(v)))
			s, q := actExp2d(z)
			m := s*q + (s - 1)
			y[i] = T(-m / (2 + m))
		}
		return
	}
	for i, v := range x {
		z := -2 * math.Log2E * float32(v)
		if z < -tanhClamp {
			z = -tanhClamp
		}
		if z > tanhClamp {
			z = tanhClamp
		}
		s, r := actSplit2f(z)
		q := actExpm1Polyf(r)
		m := s*q + (s - 1)
		y[i] = T(-m / (2 + m))
	}
}

// TanhBackward sets dx = dy·(1 − y²) from the forward output y. dx may alias
// dy or y.
func TanhBackward[T gemm.Float](dx, dy, y []T) {
	ewNeedLen("TanhBackward", "dy", len(dy), len(dx))
	ewNeedLen("TanhBackward", "y", len(y), len(dx))
	parallel.For(len(dx), ewGrain, func(lo, hi int) {
		dx, dy, y := dx[lo:hi], dy[lo:hi], y[lo:hi]
		dy, y = dy[:len(dx)], y[:len(dx)]
		for i := range dx {
			dx[i] = dy[i] * (1 - y[i]*y[i])
		}
	})
}

// GELUForward sets y = GELU(x) with PyTorch's tanh approximation, through
// the identity ½(1 + tanh(u)) = σ(2u) = 1/(1 + e^{−2u}): one exponential
// and one division per element, and more accurate than ½(1 + tanh(u)) for
// negative x, where 1 + tanh cancels. y may alias x.
func GELUForward[T gemm.Float](y, x []T) {
	ewNeedLen("GELUForward", "x", len(x), len(y))
	parallel.For(len(y), actGrain, func(lo, hi int) { geluBlock(y[lo:hi], x[lo:hi]) })
}

func geluBlock[T gemm.Float](y, x []T) {
	x = x[:len(y)]
	if actPrecise[T]() {
		for i, v := range x {
			f := float64(v)
			s, q := actExp2d(f * (geluA + geluB*f*f))
			y[i] = T(f / (1 + s*(1+q)))
		}
		return
	}
	if n := len(y) &^ 7; actAsm && n > 0 {
		geluAVX2(asF32(y), asF32(x), n)
		y, x = y[n:], x[n:]
	}
	for i, v := range x {
		f := float32(v)
		s, q := actExp2f(f * (geluA + geluB*f*f))
		y[i] = T(f / (1 + s*(1+q)))
	}
}

// asF32 returns a pointer to the first element of a non-empty float32
// slice (T's underlying type is float32 wherever it is called).
func asF32[T gemm.Float](s []T) *float32 {
	return (*float32)(unsafe.Pointer(unsafe.SliceData(s)))
}

// GELUBackward sets dx = dy·GELU'(x) for the tanh approximation:
// GELU'(x) = σ + 2x·σ(1 − σ)·√(2/π)·(1 + 3·0.044715·x²) with σ = σ(2u),
// 1 − σ being computed as e^{−2u}·σ, without cancellation when σ → 1. dx
// may alias dy but not x.
func GELUBackward[T gemm.Float](dx, dy, x []T) {
	ewNeedLen("GELUBackward", "dy", len(dy), len(dx))
	ewNeedLen("GELUBackward", "x", len(x), len(dx))
	parallel.For(len(dx), actGrain, func(lo, hi int) { geluBackBlock(dx[lo:hi], dy[lo:hi], x[lo:hi]) })
}

func geluBackBlock[T gemm.Float](dx, dy, x []T) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	if actPrecise[T]() {
		for i, v := range x {
			f := float64(v)
			s, q := actExp2d(min(actBackClamp64, f*(geluA+geluB*f*f)))
			e := s * (1 + q)
			sg := 1 / (1 + e)
			dx[i] = dy[i] * T(sg+2*f*(e*sg)*sg*geluK*(1+3*geluC*f*f))
		}
		return
	}
	for i, v := range x {
		f := float32(v)
		z := f * (geluA + geluB*f*f)
		if z > actBackClamp32 {
			z = actBackClamp32
		}
		s, q := actExp2f(z)
		e := s * (1 + q)
		sg := 1 / (1 + e)
		dx[i] = dy[i] * T(sg+2*f*(e*sg)*sg*geluK*(1+3*geluC*f*f))
	}
}

// GELUBackwardFromOutput is GELUBackward for training, where the forward
// output y = x·σ is kept anyway: σ = y/x (½ at x = 0) replaces the
// exponential, so the pass costs a division instead of ~45 instructions per
// element. 1 − σ then cancels when σ → 1, an absolute error of a few 1e-7
// on GELU' for x ≳ 3, as in PyTorch's own 1 − tanh². dx may alias dy but
// not x or y.
func GELUBackwardFromOutput[T gemm.Float](dx, dy, x, y []T) {
	ewNeedLen("GELUBackwardFromOutput", "dy", len(dy), len(dx))
	ewNeedLen("GELUBackwardFromOutput", "x", len(x), len(dx))
	ewNeedLen("GELUBackwardFromOutput", "y", len(y), len(dx))
	parallel.For(len(dx), ewGrain/4, func(lo, hi int) {
		dx, dy, x, y := dx[lo:hi], dy[lo:hi], x[lo:hi], y[lo:hi]
		dy, x, y = dy[:len(dx)], x[:len(dx)], y[:len(dx)]
		if n := len(dx) &^ 7; actAsm && !actPrecise[T]() && n > 0 {
			geluBackOutAVX2(asF32(dx), asF32(dy), asF32(x), asF32(y), n)
			dx, dy, x, y = dx[n:], dy[n:], x[n:], y[n:]
		}
		for i, v := range x {
			sg := T(0.5)
			if v != 0 {
				sg = y[i] / v
			}
			dx[i] = dy[i] * (sg + 2*v*(1-sg)*sg*geluK*(1+3*geluC*v*v))
		}
	})
}

// SigmoidForward sets y = σ(x) = 1/(1 + e^{−x}). y may alias x.
func SigmoidForward[T gemm.Float](y, x []T) {
	ewNeedLen("SigmoidForward", "x", len(x), len(y))
	parallel.For(len(y), actGrain, func(lo, hi int) { sigmoidBlock(y[lo:hi], x[lo:hi], false) })
}

// SiLUForward sets y = x·σ(x) (Swish-1), DiT's conditioning activation. y
// may alias x.
func SiLUForward[T gemm.Float](y, x []T) {
	ewNeedLen("SiLUForward", "x", len(x), len(y))
	parallel.For(len(y), actGrain, func(lo, hi int) { sigmoidBlock(y[lo:hi], x[lo:hi], true) })
}

// sigmoidBlock sets y = σ(x), or x·σ(x) when silu is set.
func sigmoidBlock[T gemm.Float](y, x []T, silu bool) {
	x = x[:len(y)]
	if n := len(y) &^ 7; actAsm && !actPrecise[T]() && n > 0 {
		sigmoidAVX2(asF32(y), asF32(x), n, silu)
		y, x = y[n:], x[n:]
	}
	switch {
	case actPrecise[T]():
		for i, v := range x {
			s, q := actExp2d(-math.Log2E * float64(v))
			num := 1.0
			if silu {
				num = float64(v)
			}
			y[i] = T(num / (1 + s*(1+q)))
		}
	case silu:
		for i, v := range x {
			s, q := actExp2f(-math.Log2E * float32(v))
			y[i] = T(float32(v) / (1 + s*(1+q)))
		}
	default:
		for i, v := range x {
			s, q := actExp2f(-math.Log2E * float32(v))
			y[i] = T(1 / (1 + s*(1+q)))
		}
	}
}

// SigmoidBackward sets dx = dy·y·(1 − y) from the forward output y. dx may
// alias dy or y.
func SigmoidBackward[T gemm.Float](dx, dy, y []T) {
	ewNeedLen("SigmoidBackward", "dy", len(dy), len(dx))
	ewNeedLen("SigmoidBackward", "y", len(y), len(dx))
	parallel.For(len(dx), ewGrain, func(lo, hi int) {
		dx, dy, y := dx[lo:hi], dy[lo:hi], y[lo:hi]
		dy, y = dy[:len(dx)], y[:len(dx)]
		for i := range dx {
			dx[i] = dy[i] * y[i] * (1 - y[i])
		}
	})
}

// SiLUBackward sets dx = dy·σ(x)·(1 + x·(1 − σ(x))), 1 − σ computed as
// e^{−x}·σ. dx may alias dy but not x.
func SiLUBackward[T gemm.Float](dx, dy, x []T) {
	ewNeedLen("SiLUBackward", "dy", len(dy), len(dx))
	ewNeedLen("SiLUBackward", "x", len(x), len(dx))
	parallel.For(len(dx), actGrain, func(lo, hi int) { siluBackBlock(dx[lo:hi], dy[lo:hi], x[lo:hi]) })
}

// SiLUBackwardFromOutput is SiLUBackward given the forward output
// y = x·σ(x) as well: σ = y/x (½ at x = 0) replaces the exponential (see
// GELUBackwardFromOutput). dx may alias dy but not x or y.
func SiLUBackwardFromOutput[T gemm.Float](dx, dy, x, y []T) {
	ewNeedLen("SiLUBackwardFromOutput", "dy", len(dy), len(dx))
	ewNeedLen("SiLUBackwardFromOutput", "x", len(x), len(dx))
	ewNeedLen("SiLUBackwardFromOutput", "y", len(y), len(dx))
	parallel.For(len(dx), ewGrain/4, func(lo, hi int) {
		dx, dy, x, y := dx[lo:hi], dy[lo:hi], x[lo:hi], y[lo:hi]
		dy, x, y = dy[:len(dx)], x[:len(dx)], y[:len(dx)]
		for i, v := range x {
			sg := T(0.5)
			if v != 0 {
				sg = y[i] / v
			}
			dx[i] = dy[i] * sg * (1 + v*(1-sg))
		}
	})
}

func siluBackBlock[T gemm.Float](dx, dy, x []T) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	if actPrecise[T]() {
		for i, v := range x {
			f := float64(v)
			s, q := actExp2d(min(actBackClamp64, -math.Log2E*f))
			e := s * (1 + q)
			sg := 1 / (1 + e)
			dx[i] = dy[i] * T(sg*(1+f*e*sg))
		}
		return
	}
	for i, v := range x {
		f := float32(v)
		z := -math.Log2E * f
		if z > actBackClamp32 {
			z = actBackClamp32
		}
		s, q := actExp2f(z)
		e := s * (1 + q)
		sg := 1 / (1 + e)
		dx[i] = dy[i] * T(sg*(1+f*e*sg))
	}
}

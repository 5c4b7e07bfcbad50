package kernels

import (
	"math"
	"unsafe"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// Softmax needs one exponential per score, twice per training step (the
// backward pass recomputes the probabilities), and math.Exp costs as much
// as the score's share of the matrix products. The float32 path therefore
// uses its own exponential, accurate to about 1 ulp, written so the loop
// body inlines: exp(x) = 2^(n/64) · e^r with a 64-entry table for the
// fractional power of two and a quadratic for e^r, |r| ≤ ln2/128.
// float64, used for gradient checks, keeps math.Exp.

const (
	exp32Lo    = -87.0               // below this the result underflows float32's normal range; 0 is used
	exp32Scale = 92.33248261689366   // 64/ln2
	exp32Magic = 12582912.0          // 1.5·2²³: adding it rounds a float32 to an integer held in the low mantissa bits
	exp32Ln2Hi = 0.01082611083984375 // ln2/64 to 11 bits, so that k·exp32Ln2Hi is exact for |k| < 2¹³
	exp32Ln2Lo = 4.313856607041089e-06
)

// exp32Table holds the bits of 2^(j/64), j = 0..63; adding n<<23 to them
// multiplies by 2^n without a second floating-point multiply.
var exp32Table = func() (t [64]uint32) {
	for j := range t {
		t[j] = math.Float32bits(float32(math.Exp2(float64(j) / 64)))
	}
	return t
}()

// expShiftRow sets row[i] = exp(row[i] − shift) and returns their sum.
// Callers pass shift ≥ max(row) (the row maximum, or a log-sum-exp), so
// arguments are ≤ 0 up to rounding.
func expShiftRow[T gemm.Float](row []T, shift T) T {
	if len(row) == 0 {
		return 0
	}
	if unsafe.Sizeof(shift) == 4 {
		// T's underlying type is float32 here, so the reinterpretation is exact.
		r := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(row))), len(row))
		return T(expShiftRow32(r, float32(shift)))
	}
	var sum T
	for i, v := range row {
		e := T(math.Exp(float64(v - shift)))
		row[i] = e
		sum += e
	}
	return sum
}

// expShiftRow32 is expShiftRow for float32. Two partial sums (eight in the
// AVX2 loop, whose values are the same bit for bit) shorten the
// floating-point add chain that would otherwise bound the loop.
func expShiftRow32(row []float32, shift float32) float32 {
	var s0, s1 float32
	if n := len(row) &^ 7; actAsm && n > 0 {
		// Eight lanes in the vector loop; the tail below adds to them.
		var acc [8]float32
		expShiftAVX2(&row[0], n, shift, &acc)
		s0 = (acc[0] + acc[1]) + (acc[2] + acc[3])
		s1 = (acc[4] + acc[5]) + (acc[6] + acc[7])
		row = row[n:]
	}
	i := 0
	for ; i+1 < len(row); i += 2 {
		e0 := exp32(row[i] - shift)
		e1 := exp32(row[i+1] - shift)
		row[i], row[i+1] = e0, e1
		s0 += e0
		s1 += e1
	}
	if i < len(row) {
		e := exp32(row[i] - shift)
		row[i] = e
		s0 += e
	}
	return s0 + s1
}

// exp32 is e^x in float32 for x ≤ 88 (softmax arguments are ≤ 0), with a
// relative error below 2·10⁻⁷; NaN propagates. It is kept under the
// inlining budget on purpose (no upper clamp, no NaN branch): a call per
// element would double the cost of the loops above.
func exp32(x float32) float32 {
	if x < exp32Lo {
		return 0
	}
	k := x*exp32Scale + exp32Magic
	kf := k - exp32Magic
	r := x - kf*exp32Ln2Hi
	r -= kf * exp32Ln2Lo
	p := (0.5*r+1)*r + 1
	ki := int32(kf) // 64n + j, exact: kf is an integer
	return p * math.Float32frombits(exp32Table[ki&63]+uint32(ki>>6)<<23)
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/dcdit/dcdit/kernels/gemm"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// attnRef is a direct float64 transcription of packed attention: for each
// sequence and head, scores, a max-subtracted softmax and the weighted sum
// of values.
func attnRef(qkv []float64, offsets []int, heads, d int, scale float64) (out, lse []float64) {
	n := offsets[len(offsets)-1]
	hd := heads * d
	out = make([]float64, n*hd)
	lse = make([]float64, n*heads)
	at := func(r, block, h, j int) float64 { return qkv[r*3*hd+block*hd+h*d+j] }
	for s := 0; s+1 < len(offsets); s++ {
		lo, hi := offsets[s], offsets[s+1]
		for h := range heads {
			for i := lo; i < hi; i++ {
				sc := make([]float64, hi-lo)
				m := math.Inf(-1)
				for j := lo; j < hi; j++ {
					var v float64
					for c := range d {
						v += at(i, 0, h, c) * at(j, 1, h, c)
					}
					sc[j-lo] = scale * v
					m = max(m, sc[j-lo])
				}
				var z float64
				for j := range sc {
					z += math.Exp(sc[j] - m)
				}
				lse[i*heads+h] = m + math.Log(z)
				for c := range d {
					var v float64
					for j := lo; j < hi; j++ {
						v += math.Exp(sc[j-lo]-m) / z * at(j, 2, h, c)
					}
					out[i*hd+h*d+c] = v
				}
			}
		}
	}
	return out, lse
}

func acOffsets(lengths []int) []int {
	off := []int{0}
	for _, l := range lengths {
		off = append(off, off[len(off)-1]+l)
	}
	return off
}

type attnCase struct {
	lengths    []int
	heads, d   int
	scale      float64
	z          attnSizing // zero: attnDefault
	gradProbes int        // finite-difference probes (0: 400)
}

func (c attnCase) String() string {
	return fmt.Sprintf("len%v_h%d_d%d_band%d", c.lengths, c.heads, c.d, c.z.minBand)
}

func (c attnCase) sizing() attnSizing {
	if c.z == (attnSizing{}) {
		return attnDefault
	}
	return c.z
}

var attnCases = []attnCase{
	{lengths: []int{5, 1, 17, 0, 8}, heads: 3, d: 4, scale: 0.5},
	{lengths: []int{1}, heads: 1, d: 1, scale: 1},
	{lengths: []int{1, 1, 1}, heads: 2, d: 3, scale: 0.7},
	{lengths: []int{0, 0, 6, 0}, heads: 2, d: 5, scale: 1.3},
	{lengths: []int{12, 3}, heads: 1, d: 8, scale: 1 / math.Sqrt(8)},
	// Bands of 2 and 3 rows: dk and dv accumulate over bands, and a short
	// last band.
	{lengths: []int{5, 1, 17, 0, 8}, heads: 2, d: 3, scale: 0.9, z: attnSizing{budget: 20, minBand: 2}},
	{lengths: []int{10, 7}, heads: 2, d: 4, scale: 0.8, z: attnSizing{budget: 1, minBand: 3}},
	// Long enough for the default sizing to band (bands of 288 rows).
	{lengths: []int{400, 3}, heads: 2, d: 4, scale: 0.3, gradProbes: 8},
	{lengths: []int{70, 64, 1}, heads: 4, d: 16, scale: 0.25, gradProbes: 24},
}

func attnScratch(c attnCase, off []int) int {
	return attentionScratch(off, c.heads, c.d, c.sizing())
}

func TestAttentionForwardMatchesReference(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(c.lengths))))
			off := acOffsets(c.lengths)
			n := off[len(off)-1]
			hd := c.heads * c.d
			qkv := acRandn(rng, n*3*hd)
			wantOut, wantLSE := attnRef(qkv, off, c.heads, c.d, c.scale)

			out := acNaNs[float64](n * hd)
			lse := acNaNs[float64](n * c.heads)
			ws := acNaNs[float64](attnScratch(c, off))
			attentionForward(out, lse, qkv, off, c.heads, c.d, c.scale, ws, c.sizing())
			if e := acRelErr(out, wantOut); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64 out: relative error %.3g", e)
			}
			if e := acRelErr(lse, wantLSE); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64 lse: relative error %.3g", e)
			}

			out32 := acNaNs[float32](n * hd)
			lse32 := acNaNs[float32](n * c.heads)
			ws32 := acNaNs[float32](attnScratch(c, off))
			attentionForward(out32, lse32, acToF32(qkv), off, c.heads, c.d, float32(c.scale), ws32, c.sizing())
			if e := acRelErr(out32, wantOut); !fixtures.Within(e, 1e-5) {
				t.Errorf("float32 out: relative error %.3g", e)
			}
			if e := acRelErr(lse32, wantLSE); !fixtures.Within(e, 1e-5) {
				t.Errorf("float32 lse: relative error %.3g", e)
			}
		})
	}
}

// attnBackward64 runs forward and backward in float64 and returns dqkv for
// the loss Σ r∘out.
func attnBackward64(c attnCase, qkv, r []float64, off []int) []float64 {
	n := off[len(off)-1]
	hd := c.heads * c.d
	out := make([]float64, n*hd)
	lse := make([]float64, n*c.heads)
	ws := acNaNs[float64](attnScratch(c, off))
	attentionForward(out, lse, qkv, off, c.heads, c.d, c.scale, ws, c.sizing())
	dqkv := acNaNs[float64](n * 3 * hd)
	attentionBackward(dqkv, r, out, lse, qkv, off, c.heads, c.d, c.scale, ws, c.sizing())
	return dqkv
}

func TestAttentionGradient(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(len(c.lengths))))
			off := acOffsets(c.lengths)
			n := off[len(off)-1]
			hd := c.heads * c.d
			qkv := acRandn(rng, n*3*hd)
			r := acRandn(rng, n*hd)
			dqkv := attnBackward64(c, qkv, r, off)

			out := make([]float64, n*hd)
			lse := make([]float64, n*c.heads)
			ws := make([]float64, attnScratch(c, off))
			loss := func() float64 {
				attentionForward(out, lse, qkv, off, c.heads, c.d, c.scale, ws, c.sizing())
				return acWeighted(r, out)
			}
			probes := c.gradProbes
			if probes == 0 {
				probes = 400
			}
			acGradCheck(t, "dqkv", qkv, dqkv, loss, probes, rng)
		})
	}
}

func TestAttentionFloat32MatchesFloat64(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(c.lengths))))
			off := acOffsets(c.lengths)
			n := off[len(off)-1]
			hd := c.heads * c.d
			qkv := acRandn(rng, n*3*hd)
			r := acRandn(rng, n*hd)
			want := attnBackward64(c, qkv, r, off)

			z := c.sizing()
			out := make([]float32, n*hd)
			lse := make([]float32, n*c.heads)
			ws := acNaNs[float32](attnScratch(c, off))
			q32 := acToF32(qkv)
			attentionForward(out, lse, q32, off, c.heads, c.d, float32(c.scale), ws, z)
			dqkv := acNaNs[float32](n * 3 * hd)
			attentionBackward(dqkv, acToF32(r), out, lse, q32, off, c.heads, c.d, float32(c.scale), ws, z)
			// Compare per block (dq, dk, dv) so that a small block is not
			// judged against a larger block's scale.
			for blk, name := range []string{"dq", "dk", "dv"} {
				var got []float32
				var ref []float64
				for i := range n {
					lo := i*3*hd + blk*hd
					got = append(got, dqkv[lo:lo+hd]...)
					ref = append(ref, want[lo:lo+hd]...)
				}
				if e := acRelErr(got, ref); !fixtures.Within(e, 1e-5) {
					t.Errorf("%s: float32 vs float64 relative error %.3g", name, e)
				}
			}
		})
	}
}

// TestAttentionIsolatesSequences perturbs one sequence and checks that the
// others' outputs and gradients stay bit-identical.
func TestAttentionIsolatesSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	off := acOffsets([]int{4, 9, 0, 6})
	heads, d := 2, 4
	hd := heads * d
	n := off[len(off)-1]
	qkv := acRandn(rng, n*3*hd)
	dout := acRandn(rng, n*hd)
	ws := make([]float64, AttentionScratch(off, heads, d))
	run := func() (out, dqkv []float64) {
		out = make([]float64, n*hd)
		lse := make([]float64, n*heads)
		dqkv = make([]float64, n*3*hd)
		AttentionForward(out, lse, qkv, off, heads, d, 0.5, ws)
		AttentionBackward(dqkv, dout, out, lse, qkv, off, heads, d, 0.5, ws)
		return out, dqkv
	}
	out0, dq0 := run()
	for i := off[1] * 3 * hd; i < off[2]*3*hd; i++ {
		qkv[i] += 1
	}
	out1, dq1 := run()
	for r := range n {
		if r >= off[1] && r < off[2] {
			continue
		}
		for c := range hd {
			if out0[r*hd+c] != out1[r*hd+c] {
				t.Fatalf("row %d of another sequence changed", r)
			}
		}
		for c := range 3 * hd {
			if dq0[r*3*hd+c] != dq1[r*3*hd+c] {
				t.Fatalf("gradient row %d of another sequence changed", r)
			}
		}
	}
}

func TestAttentionScratchBounded(t *testing.T) {
	// A Z-Image-sized sequence: scratch is a few bands per worker, linear
	// in the length and independent of the number of heads.
	off := []int{0, 4096}
	perWorker := 2*96*4096 + 96
	if got := AttentionScratch(off, 30, 128); got > runtime.GOMAXPROCS(0)*perWorker {
		t.Errorf("scratch for 4096 tokens × 30 heads: %d elements, want ≤ %d per worker", got, perWorker)
	}
	if AttentionScratch([]int{0, 0, 0}, 4, 8) != 0 {
		t.Errorf("scratch for empty sequences should be 0")
	}
	// Nothing to do: no scratch needed, nothing touched.
	AttentionForward[float32](nil, nil, nil, []int{0, 0}, 2, 4, 1, nil)
	AttentionBackward[float32](nil, nil, nil, nil, nil, []int{0}, 2, 4, 1, nil)
}

func TestAttentionPanics(t *testing.T) {
	off := []int{0, 3, 5}
	heads, d := 2, 4
	n, hd := 5, 8
	qkv := make([]float32, n*3*hd)
	out := make([]float32, n*hd)
	lse := make([]float32, n*heads)
	ws := make([]float32, AttentionScratch(off, heads, d))
	fwd := func(out, lse, qkv []float32, off []int, heads, d int, ws []float32) func() {
		return func() { AttentionForward(out, lse, qkv, off, heads, d, 1, ws) }
	}
	acExpectPanic(t, "heads 0", fwd(out, lse, qkv, off, 0, d, ws))
	acExpectPanic(t, "headDim 0", fwd(out, lse, qkv, off, heads, 0, ws))
	acExpectPanic(t, "no offsets", fwd(out, lse, qkv, nil, heads, d, ws))
	acExpectPanic(t, "offsets[0] ≠ 0", fwd(out, lse, qkv, []int{1, 5}, heads, d, ws))
	acExpectPanic(t, "decreasing offsets", fwd(out, lse, qkv, []int{0, 4, 3}, heads, d, ws))
	acExpectPanic(t, "short qkv", fwd(out, lse, qkv[1:], off, heads, d, ws))
	acExpectPanic(t, "short out", fwd(out[1:], lse, qkv, off, heads, d, ws))
	acExpectPanic(t, "short lse", fwd(out, lse[1:], qkv, off, heads, d, ws))
	acExpectPanic(t, "short scratch", fwd(out, lse, qkv, off, heads, d, ws[:5]))
	bwd := func(dqkv, dout []float32, ws []float32) func() {
		return func() { AttentionBackward(dqkv, dout, out, lse, qkv, off, heads, d, 1, ws) }
	}
	acExpectPanic(t, "short dqkv", bwd(qkv[1:], out, ws))
	acExpectPanic(t, "short dout", bwd(qkv, out[1:], ws))
	acExpectPanic(t, "short backward scratch", bwd(qkv, out, ws[:2*9+2]))
}

// gemmAllocsPerCall is what one small GemmSerial call allocates: the
// allocation tests below hold the kernels to "nothing beyond the GEMMs and
// parallel.For they call", whatever the GEMM currently does.
func gemmAllocsPerCall() float64 {
	a := make([]float32, 16)
	return testing.AllocsPerRun(20, func() {
		gemm.GemmSerial(false, true, 4, 4, 4, 1, a, 4, a, 4, 0, a, 4)
	})
}

func TestAttentionNoAllocation(t *testing.T) {
	// Steady state allocates only parallel.For's goroutines and the
	// closures they share, a count that does not grow with the problem.
	perGemm := gemmAllocsPerCall()
	allocs := func(lengths []int, heads int) float64 {
		rng := rand.New(rand.NewPCG(5, 5))
		off := acOffsets(lengths)
		n := off[len(off)-1]
		d := 16
		hd := heads * d
		qkv := acToF32(acRandn(rng, n*3*hd))
		out := make([]float32, n*hd)
		lse := make([]float32, n*heads)
		dqkv := make([]float32, n*3*hd)
		ws := make([]float32, AttentionScratch(off, heads, d))
		pairs := 0
		for _, l := range lengths {
			if l > 0 {
				pairs += heads
			}
		}
		a := testing.AllocsPerRun(5, func() {
			AttentionForward(out, lse, qkv, off, heads, d, 0.25, ws)
			AttentionBackward(dqkv, out, out, lse, qkv, off, heads, d, 0.25, ws)
		})
		// Single-band sequences: 2 products forward, 5 backward.
		return a - perGemm*float64(7*pairs)
	}
	small := allocs([]int{3, 5}, 1)
	large := allocs([]int{40, 1, 77, 0, 64, 64, 64}, 6)
	limit := float64(4 + 8*runtime.GOMAXPROCS(0))
	if !(large <= limit && large <= small+float64(2*runtime.GOMAXPROCS(0))) {
		t.Errorf("allocations per forward+backward beyond the GEMMs': %v (small problem %v, limit %v)", large, small, limit)
	}
}

func TestExp32Accuracy(t *testing.T) {
	worst := 0.0
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 1 << 21 {
		x := float32(-87 * rng.Float64())
		if i&1 == 0 {
			x = float32(-rng.Float64()) // dense near 0, where softmax weights live
		}
		want := math.Exp(float64(x))
		if e := math.Abs(float64(exp32(x))-want) / want; !fixtures.Within(e, worst) {
			worst = e
		}
	}
	if !fixtures.Within(worst, 2e-7) {
		t.Errorf("exp32 relative error %.3g > 2e-7", worst)
	}
	if exp32(-88) != 0 || exp32(float32(math.Inf(-1))) != 0 {
		t.Errorf("exp32 below the normal range should be 0")
	}
	if v := exp32(float32(math.NaN())); v == v {
		t.Errorf("exp32(NaN) = %v", v)
	}
	row := []float32{0, -1, -2, -100, float32(math.Inf(-1))}
	sum := expShiftRow(row, 0.5)
	want := math.Exp(-0.5) + math.Exp(-1.5) + math.Exp(-2.5)
	if !fixtures.Within(math.Abs(float64(sum)-want), 1e-6) || row[3] != 0 || row[4] != 0 {
		t.Errorf("expShiftRow: sum %v want %v, row %v", sum, want, row)
	}
}

// BenchmarkAttentionFwdBwd matches PyTorch's attention_fwd_bwd case: 8
// sequences of 256 tokens, 6 heads of 64, scores, softmax, P·v and the
// backward pass of sum(out), in float32.
func BenchmarkAttentionFwdBwd(b *testing.B) {
	const seqs, l, heads, d = 8, 256, 6, 64
	rng := rand.New(rand.NewPCG(6, 6))
	lengths := make([]int, seqs)
	for i := range lengths {
		lengths[i] = l
	}
	off := acOffsets(lengths)
	n := seqs * l
	hd := heads * d
	qkv := acToF32(acRandn(rng, n*3*hd))
	out := make([]float32, n*hd)
	lse := make([]float32, n*heads)
	dout := make([]float32, n*hd)
	for i := range dout {
		dout[i] = 1
	}
	dqkv := make([]float32, n*3*hd)
	ws := make([]float32, AttentionScratch(off, heads, d))
	cpu0 := acCPUSeconds()
	var best time.Duration
	for b.Loop() {
		t0 := time.Now()
		AttentionForward(out, lse, qkv, off, heads, d, 0.125, ws)
		AttentionBackward(dqkv, dout, out, lse, qkv, off, heads, d, 0.125, ws)
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	// Six L×L×d products a step as PyTorch runs it (2 forward, 4
	// backward, 2·L²·d flops each); the recomputed scores are not counted.
	flops := float64(seqs*heads) * 6 * 2 * l * l * d
	b.ReportMetric(flops/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
	b.ReportMetric((acCPUSeconds()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
	// PyTorch's reference reports the best of several repetitions.
	b.ReportMetric(best.Seconds()*1e3, "best-ms")
}

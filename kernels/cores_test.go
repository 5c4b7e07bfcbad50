package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// coreCounts are the GOMAXPROCS values under which every kernel must give
// the same bits: one core, this machine's two, and counts that split work
// unevenly (more goroutines than cores is allowed).
var coreCounts = []int{1, 2, 3, 5}

// coresCase runs one kernel (or a forward and its backward) on fixed
// inputs and returns every output it writes, scratch sized as callers size
// it under the current GOMAXPROCS.
type coresCase struct {
	name string
	run  func() [][]float32
}

// coresConv is Conv3x3Forward then Conv3x3Backward with dx, dw and dbias;
// the channel counts choose the Winograd or the im2col path.
func coresConv(rng *rand.Rand, batch, height, width, cin, cout int) func() [][]float32 {
	n := batch * height * width
	x := acToF32(acRandn(rng, n*cin))
	w := acToF32(acRandn(rng, cout*cin*9))
	bias := acToF32(acRandn(rng, cout))
	dy := acToF32(acRandn(rng, n*cout))
	return func() [][]float32 {
		ws := acNaNs[float32](Conv3x3Scratch(batch, height, width, cin, cout))
		y := make([]float32, n*cout)
		dx, dw, db := make([]float32, n*cin), make([]float32, len(w)), make([]float32, cout)
		Conv3x3Forward(y, x, w, bias, batch, height, width, cin, cout, ws)
		Conv3x3Backward(dx, dw, db, dy, x, w, batch, height, width, cin, cout, ws)
		// dw and dbias alone take the same path as with dx.
		dw2, db2 := make([]float32, len(w)), make([]float32, cout)
		Conv3x3Backward(nil, dw2, db2, dy, x, w, batch, height, width, cin, cout, ws)
		return [][]float32{y, dx, dw, db, dw2, db2}
	}
}

// coresOffsets is ragged samples of the given lengths, packed.
func coresOffsets(lengths ...int) []int { return acOffsets(lengths) }

func coresCases() []coresCase {
	rng := rand.New(rand.NewPCG(31, 31))
	randn := func(n int) []float32 { return acToF32(acRandn(rng, n)) }
	var cases []coresCase
	add := func(name string, run func() [][]float32) { cases = append(cases, coresCase{name, run}) }

	// Convolutions: Winograd both ways (9 and 7 tile blocks), im2col for a
	// 4-channel input or output (10 token blocks), and a 1×1.
	add("conv3x3/winograd_16to24", coresConv(rng, 8, 20, 20, 16, 24))
	add("conv3x3/winograd_48to48", coresConv(rng, 8, 16, 16, 48, 48))
	add("conv3x3/im2col_4to32", coresConv(rng, 16, 16, 16, 4, 32))
	add("conv3x3/im2col_32to4", coresConv(rng, 16, 16, 16, 32, 4))
	add("conv3x3/im2col_12to12_odd", coresConv(rng, 16, 15, 13, 12, 12))
	{
		const tokens, cin, cout = 3000, 64, 48
		x, w, bias, dy := randn(tokens*cin), randn(cout*cin), randn(cout), randn(tokens*cout)
		add("conv1x1", func() [][]float32 {
			y, dx, dw, db := make([]float32, tokens*cout), make([]float32, tokens*cin), make([]float32, len(w)), make([]float32, cout)
			Conv1x1Forward(y, x, w, bias, tokens, cin, cout)
			Conv1x1Backward(dx, dw, db, dy, x, w, tokens, cin, cout)
			return [][]float32{y, dx, dw, db}
		})
	}

	// Linear layers and the GEMM under them, with shapes that leave
	// partial register tiles.
	{
		const rows, in, out = 1001, 96, 83
		x, w, b, dy := randn(rows*in), randn(out*in), randn(out), randn(rows*out)
		add("linear", func() [][]float32 {
			y, dx, dw, db := make([]float32, rows*out), make([]float32, rows*in), make([]float32, len(w)), make([]float32, out)
			LinearForward(y, x, w, b, rows, in, out)
			LinearBackward(dx, dw, db, dy, x, w, rows, in, out)
			return [][]float32{y, dx, dw, db}
		})
	}
	{
		const m, n, k = 389, 301, 203
		a, b, c0 := randn(k*m), randn(n*k), randn(m*n)
		add("gemm", func() [][]float32 {
			c1, c2 := make([]float32, m*n), append([]float32(nil), c0...)
			gemm.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
			gemm.Gemm(true, true, m, n, k, 0.5, a, m, b, k, 1, c2, n)
			return [][]float32{c1, c2}
		})
	}

	// Normalisations.
	{
		const rows, cols = 2003, 96
		x, w, dy := randn(rows*cols), randn(cols), randn(rows*cols)
		add("layernorm", func() [][]float32 {
			y, mean, rstd, dx := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows), make([]float32, rows*cols)
			LayerNormForward(y, mean, rstd, x, rows, cols, 1e-6)
			LayerNormBackward(dx, dy, x, mean, rstd, rows, cols)
			return [][]float32{y, mean, rstd, dx}
		})
		add("rmsnorm", func() [][]float32 {
			y, rstd, dx, dw := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows*cols), make([]float32, cols)
			RMSNormForward(y, rstd, x, w, rows, cols, 1e-5)
			RMSNormBackward(dx, dw, dy, x, w, rstd, rows, cols)
			return [][]float32{y, rstd, dx, dw}
		})
	}
	{
		const batch, tokens, channels, groups = 9, 256, 32, 8
		n := batch * tokens * channels
		x, w, b, dy := randn(n), randn(channels), randn(channels), randn(n)
		add("groupnorm", func() [][]float32 {
			y, mean, rstd := make([]float32, n), make([]float32, batch*groups), make([]float32, batch*groups)
			dx, dw, db := make([]float32, n), make([]float32, channels), make([]float32, channels)
			GroupNormForward(y, mean, rstd, x, w, b, batch, tokens, channels, groups, 1e-6)
			GroupNormBackward(dx, dw, db, dy, x, mean, rstd, w, batch, tokens, channels, groups)
			return [][]float32{y, mean, rstd, dx, dw, db}
		})
		add("groupnorm_silu", func() [][]float32 {
			y, mean, rstd := make([]float32, n), make([]float32, batch*groups), make([]float32, batch*groups)
			dx, dw, db := make([]float32, n), make([]float32, channels), make([]float32, channels)
			GroupNormSiLUForward(y, mean, rstd, x, w, b, batch, tokens, channels, groups, 1e-6)
			GroupNormSiLUBackward(dx, dw, db, dy, x, mean, rstd, w, b, batch, tokens, channels, groups)
			dw2, db2 := make([]float32, channels), make([]float32, channels)
			GroupNormSiLUBackward(nil, dw2, db2, dy, x, mean, rstd, w, b, batch, tokens, channels, groups)
			return [][]float32{y, mean, rstd, dx, dw, db, dw2, db2}
		})
	}

	// Per-sample broadcasts and row reductions, with ragged samples: few
	// samples (column blocks) and many (whole samples per worker).
	for _, lengths := range [][]int{{700, 1, 0, 1299}, {90, 130, 60, 200, 110, 75, 140, 95, 101, 64, 88, 120}} {
		const cols = 160
		offsets := coresOffsets(lengths...)
		rows, samples := offsets[len(offsets)-1], len(lengths)
		x, dy, h := randn(rows*cols), randn(rows*cols), randn(rows*cols)
		shift, scale, gate := randn(samples*cols), randn(samples*cols), randn(samples*cols)
		name := fmt.Sprintf("%dsamples", samples)
		add("modulate/"+name, func() [][]float32 {
			y, dx := make([]float32, rows*cols), make([]float32, rows*cols)
			dsh, dsc := make([]float32, samples*cols), make([]float32, samples*cols)
			ModulateForward(y, x, shift, scale, offsets, cols)
			ModulateBackward(dx, dsh, dsc, dy, x, scale, offsets, cols)
			return [][]float32{y, dx, dsh, dsc}
		})
		add("gated_residual/"+name, func() [][]float32 {
			y, dx, dg, dh := make([]float32, rows*cols), make([]float32, rows*cols), make([]float32, samples*cols), make([]float32, rows*cols)
			GatedResidualForward(y, x, gate, h, offsets, cols)
			GatedResidualBackward(dx, dg, dh, dy, gate, h, offsets, cols)
			return [][]float32{y, dx, dg, dh}
		})
		add("rows/"+name, func() [][]float32 {
			sum, mean, dx := make([]float32, samples*cols), make([]float32, samples*cols), make([]float32, rows*cols)
			SumRows(sum, x, offsets, cols)
			MeanRows(mean, x, offsets, cols)
			MeanRowsBackward(dx, mean, offsets, cols)
			return [][]float32{sum, mean, dx}
		})
	}
	{
		const n = 300_007
		a, b := randn(n), randn(n)
		add("whole_sums", func() [][]float32 {
			da, db := make([]float32, n), make([]float32, n)
			SquaredDiffBackward(da, db, a, b, 1e-3)
			return [][]float32{{Sum(a), SumSquares(a), SumSquaredDiff(a, b)}, da, db}
		})
		add("activations", func() [][]float32 {
			var out [][]float32
			for _, f := range []func(y, x []float32){TanhForward[float32], GELUForward[float32], SigmoidForward[float32], SiLUForward[float32]} {
				y := make([]float32, n)
				f(y, a)
				out = append(out, y)
			}
			for _, f := range []func(dx, dy, x []float32){GELUBackward[float32], SiLUBackward[float32], TanhBackward[float32], SigmoidBackward[float32]} {
				dx := make([]float32, n)
				f(dx, b, a)
				out = append(out, dx)
			}
			for i, f := range []func(dx, dy, x, y []float32){GELUBackwardFromOutput[float32], SiLUBackwardFromOutput[float32]} {
				dx := make([]float32, n)
				f(dx, b, a, out[1+2*i]) // GELU's and SiLU's forward outputs
				out = append(out, dx)
			}
			return out
		})
	}
	{
		const rows, cols = 3001, 64
		x, dy, s := randn(rows*cols), randn(rows*cols), randn(rows)
		add("colsum_scalerows", func() [][]float32 {
			cs, dx, ds := make([]float32, cols), make([]float32, rows*cols), make([]float32, rows)
			ColSum(cs, x, rows, cols)
			ScaleRowsBackward(dx, ds, dy, x, s, cols)
			return [][]float32{cs, dx, ds}
		})
		idx := make([]int, 2500)
		for i := range idx {
			idx[i] = rng.IntN(rows / 3) // repeated indices
		}
		dg := randn(len(idx) * cols)
		add("gather_backward", func() [][]float32 {
			dx := make([]float32, rows*cols)
			GatherRowsBackward(dx, dg, idx, cols)
			return [][]float32{dx}
		})
	}

	// Attention over ragged sequences, recomputed and kept.
	{
		const heads, d = 4, 16
		offsets := coresOffsets(100, 37, 0, 200, 64, 150)
		n := offsets[len(offsets)-1]
		qkv, dout := randn(n*3*heads*d), randn(n*heads*d)
		scale := float32(1 / math.Sqrt(d))
		add("attention", func() [][]float32 {
			ws := acNaNs[float32](AttentionScratch(offsets, heads, d))
			out, lse, dqkv := make([]float32, n*heads*d), make([]float32, n*heads), make([]float32, len(qkv))
			AttentionForward(out, lse, qkv, offsets, heads, d, scale, ws)
			AttentionBackward(dqkv, dout, out, lse, qkv, offsets, heads, d, scale, ws)
			probs := make([]float32, AttentionProbs(offsets, heads, d))
			out2, lse2, dqkv2 := make([]float32, len(out)), make([]float32, len(lse)), make([]float32, len(qkv))
			AttentionForwardKeep(out2, lse2, probs, qkv, offsets, heads, d, scale, ws)
			AttentionBackwardKept(dqkv2, dout, out2, probs, qkv, offsets, heads, d, scale, ws)
			return [][]float32{out, lse, dqkv, out2, lse2, probs, dqkv2}
		})
	}

	// De-chunking over two samples of kept tokens on a 16×16 grid.
	{
		const cols = 48
		offsets := coresOffsets(180, 97)
		rows := offsets[len(offsets)-1]
		pos := make([]float64, 2*rows)
		for i := range rows {
			pos[2*i], pos[2*i+1] = float64(rng.IntN(16)), float64(rng.IntN(16))
		}
		h, dy := randn(rows*cols), randn(rows*cols)
		p := make([]float32, rows)
		for i := range p {
			p[i] = rng.Float32()
		}
		add("dechunk", func() [][]float32 {
			ws := make([]float32, DeChunkScratch(offsets, cols))
			y, q, z, s := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows), make([]float32, rows*cols)
			DeChunkForward(y, q, z, s, h, p, pos, offsets, rows, cols, 1, 0.05, 0.95, ws)
			dh, dp := make([]float32, rows*cols), make([]float32, rows)
			DeChunkBackward(dh, dp, dy, h, p, q, z, s, pos, offsets, rows, cols, 1, 0.05, 0.95, ws)
			return [][]float32{y, q, z, s, dh, dp}
		})
	}
	return cases
}

// TestKernelsIndependentOfCores: every kernel gives the same bits under
// every GOMAXPROCS, so that training runs repeat bit for bit on any
// machine. Reductions must split work by the problem's size, never by the
// number of workers.
func TestKernelsIndependentOfCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range coresCases() {
		t.Run(c.name, func(t *testing.T) {
			var want [][]float32
			for _, procs := range coreCounts {
				runtime.GOMAXPROCS(procs)
				got := c.run()
				if want == nil {
					want = got
					continue
				}
				for i := range want {
					if j := firstBitDiff(got[i], want[i]); j >= 0 {
						t.Errorf("GOMAXPROCS=%d: output %d differs from GOMAXPROCS=%d first at [%d]: %g, want %g",
							procs, i, coreCounts[0], j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}

// firstBitDiff is the first index where a and b differ bit for bit, or −1.
func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

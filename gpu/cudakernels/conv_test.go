package cudakernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dcdit/dcdit/gpu/cuda"
	cpu "github.com/dcdit/dcdit/kernels"
)

// openScaffold opens the device and loads the base and scaffold kernels,
// or skips naming what is missing.
func openScaffold(t testing.TB) (*cuda.Runtime, *Scaffold) {
	t.Helper()
	r, s := openKernels(t, testCacheDir)
	sc, err := LoadScaffold(s)
	if err != nil {
		t.Fatal(err)
	}
	return r, sc
}

// alloc allocates n float32 of device memory, freed at the test's end.
func alloc(t testing.TB, r *cuda.Runtime, n int) cuda.Buffer {
	t.Helper()
	b, err := r.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}

// gpuConvCase is one 3×3 convolution problem; chunk > 0 gives a workspace
// of that many tokens' panel rows, so the tokens go through in chunks.
type gpuConvCase struct {
	batch, height, width, cin, cout int
	bias                            bool
	chunk                           int
}

func (c gpuConvCase) tokens() int { return c.batch * c.height * c.width }

// TestConv3x3 compares Conv3x3Forward and Conv3x3Backward (y, dx, dw,
// dbias) with kernels.Conv3x3Forward/Backward: grids of one row or column,
// single channels, widths at which the CPU takes its Winograd path (≥ 16
// channels both ways), and workspaces that force chunks straddling grid
// rows and samples (dw then accumulates over chunks). Outputs start as NaN.
func TestConv3x3(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range []gpuConvCase{
		{1, 1, 1, 1, 1, true, 0},
		{2, 1, 5, 4, 3, true, 0},
		{1, 5, 1, 2, 2, false, 0},
		{3, 7, 5, 3, 6, true, 0},
		{3, 3, 4, 2, 3, true, 5},
		{2, 5, 3, 4, 2, false, 7},
		{4, 7, 7, 90, 3, true, 0},
		{2, 9, 11, 20, 24, true, 0},
		{3, 8, 8, 16, 32, true, 37},
		{2, 16, 16, 128, 128, true, 0},
	} {
		t.Run(fmt.Sprintf("b%d/%dx%d/%d-%d/bias%v/chunk%d", c.batch, c.height, c.width, c.cin, c.cout, c.bias, c.chunk), func(t *testing.T) {
			n := c.tokens()
			x, w, dy := randSlice(rng, n*c.cin, 1, 0), randSlice(rng, 9*c.cin*c.cout, 0.3, 0), randSlice(rng, n*c.cout, 1, 0)
			var bias []float32
			if c.bias {
				bias = randSlice(rng, c.cout, 1, 0)
			}
			cws := make([]float32, cpu.Conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout))
			y := make([]float32, n*c.cout)
			cpu.Conv3x3Forward(y, x, w, bias, c.batch, c.height, c.width, c.cin, c.cout, cws)
			dx, dw := make([]float32, n*c.cin), make([]float32, 9*c.cin*c.cout)
			var db []float32
			if c.bias {
				db = make([]float32, c.cout)
			}
			cpu.Conv3x3Backward(dx, dw, db, dy, x, w, c.batch, c.height, c.width, c.cin, c.cout, cws)

			wsBytes := Conv3x3WorkspaceBytes(c.batch, c.height, c.width, c.cin, c.cout)
			if c.chunk > 0 {
				wsBytes = Conv3x3MinWorkspaceBytes(c.cin, c.cout) + 4*9*max(c.cin, c.cout)*(c.chunk-1)
			}
			ws, err := r.Alloc(wsBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Free()
			gx, gw, gdy := upload(t, r, x), upload(t, r, w), upload(t, r, dy)
			var gb cuda.Buffer
			if c.bias {
				gb = upload(t, r, bias)
			}
			gy := nanBuf(t, r, n*c.cout)
			if err := sc.Conv3x3Forward(gy, gx, gw, gb, ws, c.batch, c.height, c.width, c.cin, c.cout, cuda.FP32); err != nil {
				t.Fatal(err)
			}
			check(t, "y", download(t, gy), y)
			gdx, gdw := nanBuf(t, r, n*c.cin), nanBuf(t, r, 9*c.cin*c.cout)
			var gdb cuda.Buffer
			if c.bias {
				gdb = nanBuf(t, r, c.cout)
			}
			if err := sc.Conv3x3Backward(gdx, gdw, gdb, gdy, gx, gw, ws, c.batch, c.height, c.width, c.cin, c.cout, cuda.FP32); err != nil {
				t.Fatal(err)
			}
			check(t, "dx", download(t, gdx), dx)
			check(t, "dw", download(t, gdw), dw)
			if c.bias {
				check(t, "dbias", download(t, gdb), db)
			}
			if c.cin >= 16 {
				// TF32 rounds the operands to 10 mantissa bits.
				if err := sc.Conv3x3Forward(gy, gx, gw, gb, ws, c.batch, c.height, c.width, c.cin, c.cout, cuda.TF32); err != nil {
					t.Fatal(err)
				}
				checkTol(t, "y (TF32)", download(t, gy), y, 1e-2)
			}
		})
	}
}

// TestConv1x1 compares Conv1x1Forward and Conv1x1Backward with
// kernels.Conv1x1Forward/Backward.
func TestConv1x1(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(43, 44))
	for _, c := range []struct {
		tokens, cin, cout int
		bias              bool
	}{
		{1, 1, 1, true}, {37, 5, 7, false}, {37, 5, 7, true}, {1000, 64, 128, true}, {4096, 4, 1152, true},
	} {
		t.Run(fmt.Sprintf("t%d/%d-%d/bias%v", c.tokens, c.cin, c.cout, c.bias), func(t *testing.T) {
			x, w, dy := randSlice(rng, c.tokens*c.cin, 1, 0), randSlice(rng, c.cin*c.cout, 0.3, 0), randSlice(rng, c.tokens*c.cout, 1, 0)
			var bias []float32
			var gb, gdb cuda.Buffer
			if c.bias {
				bias = randSlice(rng, c.cout, 1, 0)
				gb, gdb = upload(t, r, bias), nanBuf(t, r, c.cout)
			}
			y := make([]float32, c.tokens*c.cout)
			cpu.Conv1x1Forward(y, x, w, bias, c.tokens, c.cin, c.cout)
			dx, dw := make([]float32, c.tokens*c.cin), make([]float32, c.cin*c.cout)
			var db []float32
			if c.bias {
				db = make([]float32, c.cout)
			}
			cpu.Conv1x1Backward(dx, dw, db, dy, x, w, c.tokens, c.cin, c.cout)

			gx, gw, gdy := upload(t, r, x), upload(t, r, w), upload(t, r, dy)
			gy, gdx, gdw := nanBuf(t, r, c.tokens*c.cout), nanBuf(t, r, c.tokens*c.cin), nanBuf(t, r, c.cin*c.cout)
			if err := sc.Conv1x1Forward(gy, gx, gw, gb, c.tokens, c.cin, c.cout, cuda.FP32); err != nil {
				t.Fatal(err)
			}
			if err := sc.Conv1x1Backward(gdx, gdw, gdb, gdy, gx, gw, c.tokens, c.cin, c.cout, cuda.FP32); err != nil {
				t.Fatal(err)
			}
			check(t, "y", download(t, gy), y)
			check(t, "dx", download(t, gdx), dx)
			check(t, "dw", download(t, gdw), dw)
			if c.bias {
				check(t, "dbias", download(t, gdb), db)
			}
		})
	}
}

// TestConvTiming times a 3×3 convolution of DC-DiT's scaffold size
// (32 grids of 32×32 tokens, 128 → 128 channels) forward and backward on
// the GPU (FP32 and TF32, the average of 20 after a warm-up) against one
// run of the CPU kernels, and checks the GPU result once more.
func TestConvTiming(t *testing.T) {
	r, sc := openScaffold(t)
	const batch, hw, cin, cout = 32, 32, 128, 128
	n := batch * hw * hw
	rng := rand.New(rand.NewPCG(45, 46))
	x, w, bias, dy := randSlice(rng, n*cin, 1, 0), randSlice(rng, 9*cin*cout, 0.05, 0), randSlice(rng, cout, 1, 0), randSlice(rng, n*cout, 1, 0)
	cws := make([]float32, cpu.Conv3x3Scratch(batch, hw, hw, cin, cout))
	y := make([]float32, n*cout)
	start := time.Now()
	cpu.Conv3x3Forward(y, x, w, bias, batch, hw, hw, cin, cout, cws)
	cpuFwd := time.Since(start)
	dx, dw, db := make([]float32, n*cin), make([]float32, 9*cin*cout), make([]float32, cout)
	start = time.Now()
	cpu.Conv3x3Backward(dx, dw, db, dy, x, w, batch, hw, hw, cin, cout, cws)
	cpuBwd := time.Since(start)

	ws, err := r.Alloc(Conv3x3WorkspaceBytes(batch, hw, hw, cin, cout))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	gx, gw, gb, gdy := upload(t, r, x), upload(t, r, w), upload(t, r, bias), upload(t, r, dy)
	gy, gdx, gdw, gdb := alloc(t, r, n*cout), alloc(t, r, n*cin), alloc(t, r, 9*cin*cout), alloc(t, r, cout)
	flops := 2 * float64(n) * float64(9*cin*cout)
	// The column panel alone: the forward pass's cost beside the GEMM.
	col, err := f32Slice(ws, 0, n*9*cin)
	if err != nil {
		t.Fatal(err)
	}
	if err := timeRuns(r, 20, func() error { return sc.im2col3x3(col, gx, 0, n, hw, hw, cin) }, func(d time.Duration) {
		t.Logf("im2col alone: %v (%.0f GB/s written)", d, float64(4*n*9*cin)/d.Seconds()/1e9)
	}); err != nil {
		t.Fatal(err)
	}
	for _, prec := range []cuda.Precision{cuda.FP32, cuda.TF32} {
		fwd := func() error { return sc.Conv3x3Forward(gy, gx, gw, gb, ws, batch, hw, hw, cin, cout, prec) }
		bwd := func() error {
			return sc.Conv3x3Backward(gdx, gdw, gdb, gdy, gx, gw, ws, batch, hw, hw, cin, cout, prec)
		}
		var times [2]time.Duration
		for k, run := range []func() error{fwd, bwd} {
			if err := run(); err != nil {
				t.Fatal(err)
			}
			if err := r.Synchronize(); err != nil {
				t.Fatal(err)
			}
			const iters = 20
			start := time.Now()
			for range iters {
				if err := run(); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Synchronize(); err != nil {
				t.Fatal(err)
			}
			times[k] = time.Since(start) / iters
		}
		t.Logf("%v: GPU forward %v (%.1f TFLOP/s), backward (dx, dw, dbias) %v (%.1f TFLOP/s); CPU forward %v, backward %v",
			prec, times[0], flops/times[0].Seconds()/1e12, times[1], 2*flops/times[1].Seconds()/1e12, cpuFwd, cpuBwd)
		bound := tol
		if prec == cuda.TF32 {
			bound = 1e-2
		}
		checkTol(t, fmt.Sprintf("y (%v)", prec), download(t, gy), y, bound)
		checkTol(t, fmt.Sprintf("dx (%v)", prec), download(t, gdx), dx, bound)
		checkTol(t, fmt.Sprintf("dw (%v)", prec), download(t, gdw), dw, bound)
		checkTol(t, fmt.Sprintf("dbias (%v)", prec), download(t, gdb), db, bound)
	}
}

// TestScaffoldArgumentErrors checks, without a device, that bad shapes,
// precisions, sizes and indices are errors, not panics: every check runs
// before the first device call.
func TestScaffoldArgumentErrors(t *testing.T) {
	sc := &Scaffold{set: &Set{}}
	var none cuda.Buffer
	for name, err := range map[string]error{
		"Conv3x3Forward shape":     sc.Conv3x3Forward(none, none, none, none, none, 1, 0, 3, 1, 1, cuda.FP32),
		"Conv3x3Forward precision": sc.Conv3x3Forward(none, none, none, none, none, 1, 3, 3, 1, 1, cuda.BF16),
		"Conv3x3Forward sizes":     sc.Conv3x3Forward(none, none, none, none, none, 1, 3, 3, 1, 1, cuda.FP32),
		"Conv3x3Backward sizes":    sc.Conv3x3Backward(none, none, none, none, none, none, none, 1, 3, 3, 1, 1, cuda.FP32),
		"Conv1x1Forward shape":     sc.Conv1x1Forward(none, none, none, none, -1, 1, 1, cuda.FP32),
		"Conv1x1Backward sizes":    sc.Conv1x1Backward(none, none, none, none, none, none, 5, 1, 1, cuda.TF32),
		"GatherRows nil index":     sc.GatherRows(none, none, nil, 3),
		"ScatterRows repeats":      sc.ScatterRows(none, none, &RowIndex{n: 2, rows: 2}, 3),
		"DeChunkForward nil":       sc.DeChunkForward(none, none, none, none, none, none, none, nil, 4, 1, 0.05, 0.95),
		"DeChunkForward sigma":     sc.DeChunkForward(none, none, none, none, none, none, none, &Packing{offsets: []int{0}}, 4, 0, 0.05, 0.95),
		"SoftmaxBackward sizes":    sc.SoftmaxBackward(none, none, none, 2, 3),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		idx  []int
		rows int
	}{{[]int{3}, 3}, {[]int{-1}, 3}, {[]int{0}, -1}} {
		if _, err := sc.NewRowIndex(tc.idx, tc.rows); err == nil {
			t.Errorf("NewRowIndex(%v, %d): no error", tc.idx, tc.rows)
		}
	}
}

// timeRuns runs f once, then iters times between synchronisations, and
// reports the mean time of one run.
func timeRuns(r *cuda.Runtime, iters int, f func() error, report func(time.Duration)) error {
	if err := f(); err != nil {
		return err
	}
	if err := r.Synchronize(); err != nil {
		return err
	}
	start := time.Now()
	for range iters {
		if err := f(); err != nil {
			return err
		}
	}
	if err := r.Synchronize(); err != nil {
		return err
	}
	report(time.Since(start) / time.Duration(iters))
	return nil
}

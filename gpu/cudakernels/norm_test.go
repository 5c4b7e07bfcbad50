package cudakernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/gpu/cuda"
	cpu "github.com/dcdit/dcdit/kernels"
)

// nanBuf uploads n NaNs: an output buffer whose unwritten elements show.
func nanBuf(t testing.TB, r *cuda.Runtime, n int) cuda.Buffer {
	t.Helper()
	return upload(t, r, nanSlice(n))
}

// TestLayerNormBackward compares LayerNormBackward with
// kernels.LayerNormBackward, both given the CPU forward pass's statistics.
func TestLayerNormBackward(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct{ rows, cols int }{{1, 1}, {7, 20}, {64, 1152}, {300, 257}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			n := tc.rows * tc.cols
			x, dy := randSlice(rng, n, 2, 0.5), randSlice(rng, n, 1, 0)
			y, mean, rstd := make([]float32, n), make([]float32, tc.rows), make([]float32, tc.rows)
			cpu.LayerNormForward(y, mean, rstd, x, tc.rows, tc.cols, 1e-6)
			want := make([]float32, n)
			cpu.LayerNormBackward(want, dy, x, mean, rstd, tc.rows, tc.cols)
			dx := nanBuf(t, r, n)
			if err := s.LayerNormBackward(dx, upload(t, r, dy), upload(t, r, x), upload(t, r, mean), upload(t, r, rstd), tc.rows, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "dx", download(t, dx), want)
		})
	}
}

// TestRMSNorm compares RMSNorm and RMSNormBackward (y, rstd, dx, dw) with
// kernels.RMSNormForward and kernels.RMSNormBackward.
func TestRMSNorm(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(33, 34))
	// No single-column case: there dx = rstd·w·dy·eps/(x² + eps) is the
	// difference of two nearly equal terms, rounding noise on both sides.
	for _, tc := range []struct{ rows, cols int }{{1, 2}, {7, 20}, {64, 1152}, {1000, 383}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			n := tc.rows * tc.cols
			x, w, dy := randSlice(rng, n, 2, 0.3), randSlice(rng, tc.cols, 0.5, 1), randSlice(rng, n, 1, 0)
			y, rstd := make([]float32, n), make([]float32, tc.rows)
			cpu.RMSNormForward(y, rstd, x, w, tc.rows, tc.cols, 1e-6)
			dx, dw := make([]float32, n), make([]float32, tc.cols)
			cpu.RMSNormBackward(dx, dw, dy, x, w, rstd, tc.rows, tc.cols)

			gx, gw := upload(t, r, x), upload(t, r, w)
			gy, gr := nanBuf(t, r, n), nanBuf(t, r, tc.rows)
			if err := s.RMSNorm(gy, gr, gx, gw, tc.rows, tc.cols, 1e-6); err != nil {
				t.Fatal(err)
			}
			check(t, "y", download(t, gy), y)
			check(t, "rstd", download(t, gr), rstd)
			gdx, gdw := nanBuf(t, r, n), nanBuf(t, r, tc.cols)
			// The CPU's rstd, so that the backward pass alone is compared.
			if err := s.RMSNormBackward(gdx, gdw, upload(t, r, dy), gx, gw, upload(t, r, rstd), tc.rows, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "dx", download(t, gdx), dx)
			check(t, "dw", download(t, gdw), dw)
		})
	}
}

// TestGroupNorm compares GroupNorm and GroupNormSiLU and their backward
// passes (y, mean, rstd, dx, dw, db) with kernels.GroupNormForward/Backward
// and kernels.GroupNormSiLUForward/Backward, including one channel per
// group and a large common offset.
func TestGroupNorm(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(35, 36))
	for _, tc := range []struct {
		batch, tokens, channels, groups int
		offset                          float64
	}{
		// Groups of at least 3 values: with 2, dx is zero in exact
		// arithmetic (both degrees of freedom are projected out) and only
		// rounding noise remains to compare.
		{1, 3, 4, 2, 0}, {2, 16, 64, 32, 0}, {3, 100, 96, 8, 0}, {4, 256, 128, 32, 0}, {2, 49, 48, 48, 0}, {2, 64, 64, 4, 20},
	} {
		for _, silu := range []bool{false, true} {
			t.Run(fmt.Sprintf("silu%v/b%d/t%d/c%d/g%d/offset%g", silu, tc.batch, tc.tokens, tc.channels, tc.groups, tc.offset), func(t *testing.T) {
				n, ng := tc.batch*tc.tokens*tc.channels, tc.batch*tc.groups
				x := randSlice(rng, n, 2, tc.offset)
				w, b := randSlice(rng, tc.channels, 0.5, 1), randSlice(rng, tc.channels, 0.5, 0)
				dy := randSlice(rng, n, 1, 0)
				y, mean, rstd := make([]float32, n), make([]float32, ng), make([]float32, ng)
				dx, dw, db := make([]float32, n), make([]float32, tc.channels), make([]float32, tc.channels)
				gx, gw, gb, gdy := upload(t, r, x), upload(t, r, w), upload(t, r, b), upload(t, r, dy)
				gy, gm, gr := nanBuf(t, r, n), nanBuf(t, r, ng), nanBuf(t, r, ng)
				gdx, gdw, gdb := nanBuf(t, r, n), nanBuf(t, r, tc.channels), nanBuf(t, r, tc.channels)
				var fwd, bwd error
				if silu {
					cpu.GroupNormSiLUForward(y, mean, rstd, x, w, b, tc.batch, tc.tokens, tc.channels, tc.groups, 1e-5)
					cpu.GroupNormSiLUBackward(dx, dw, db, dy, x, mean, rstd, w, b, tc.batch, tc.tokens, tc.channels, tc.groups)
					fwd = s.GroupNormSiLU(gy, gm, gr, gx, gw, gb, tc.batch, tc.tokens, tc.channels, tc.groups, 1e-5)
					// The CPU's statistics, so that the backward pass alone is compared.
					bwd = s.GroupNormSiLUBackward(gdx, gdw, gdb, gdy, gx, upload(t, r, mean), upload(t, r, rstd), gw, gb,
						tc.batch, tc.tokens, tc.channels, tc.groups)
				} else {
					cpu.GroupNormForward(y, mean, rstd, x, w, b, tc.batch, tc.tokens, tc.channels, tc.groups, 1e-5)
					cpu.GroupNormBackward(dx, dw, db, dy, x, mean, rstd, w, tc.batch, tc.tokens, tc.channels, tc.groups)
					fwd = s.GroupNorm(gy, gm, gr, gx, gw, gb, tc.batch, tc.tokens, tc.channels, tc.groups, 1e-5)
					bwd = s.GroupNormBackward(gdx, gdw, gdb, gdy, gx, upload(t, r, mean), upload(t, r, rstd), gw,
						tc.batch, tc.tokens, tc.channels, tc.groups)
				}
				if fwd != nil || bwd != nil {
					t.Fatal(fwd, bwd)
				}
				check(t, "y", download(t, gy), y)
				check(t, "mean", download(t, gm), mean)
				check(t, "rstd", download(t, gr), rstd)
				check(t, "dx", download(t, gdx), dx)
				check(t, "dw", download(t, gdw), dw)
				check(t, "db", download(t, gdb), db)
			})
		}
	}
}

// TestModulation compares Modulate, GatedResidual and their backward
// passes with kernels.ModulateForward/Backward and
// kernels.GatedResidualForward/Backward on packed samples of different
// lengths, an empty one included (its per-sample gradients are zero).
func TestModulation(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(37, 38))
	for _, tc := range []struct {
		lengths []int
		cols    int
	}{
		{[]int{1}, 1}, {[]int{3, 0, 17, 64}, 5}, {[]int{256, 100, 0, 7}, 1152},
	} {
		t.Run(fmt.Sprintf("%v/c%d", tc.lengths, tc.cols), func(t *testing.T) {
			off := offsetsOf(tc.lengths)
			rows, S := off[len(off)-1], len(tc.lengths)
			n, ns := rows*tc.cols, S*tc.cols
			x, h, dy := randSlice(rng, n, 1, 0), randSlice(rng, n, 1, 0), randSlice(rng, n, 1, 0)
			shift, scale, gate := randSlice(rng, ns, 0.5, 0), randSlice(rng, ns, 0.5, 0), randSlice(rng, ns, 0.5, 0)
			p, err := s.NewPacking(off)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Free()
			gx, gh, gdy := upload(t, r, x), upload(t, r, h), upload(t, r, dy)
			gshift, gscale, ggate := upload(t, r, shift), upload(t, r, scale), upload(t, r, gate)

			y := make([]float32, n)
			cpu.ModulateForward(y, x, shift, scale, off, tc.cols)
			gy := nanBuf(t, r, n)
			if err := s.Modulate(gy, gx, gshift, gscale, p, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "modulate y", download(t, gy), y)

			dx, dsh, dsc := make([]float32, n), make([]float32, ns), make([]float32, ns)
			cpu.ModulateBackward(dx, dsh, dsc, dy, x, scale, off, tc.cols)
			gdx, gdsh, gdsc := nanBuf(t, r, n), nanBuf(t, r, ns), nanBuf(t, r, ns)
			if err := s.ModulateBackward(gdx, gdsh, gdsc, gdy, gx, gscale, p, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "modulate dx", download(t, gdx), dx)
			check(t, "modulate dshift", download(t, gdsh), dsh)
			check(t, "modulate dscale", download(t, gdsc), dsc)

			cpu.GatedResidualForward(y, x, gate, h, off, tc.cols)
			if err := s.GatedResidual(gy, gx, ggate, gh, p, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "gated y", download(t, gy), y)

			dgate, dh := make([]float32, ns), make([]float32, n)
			cpu.GatedResidualBackward(dx, dgate, dh, dy, gate, h, off, tc.cols)
			gdx, gdg, gdh := nanBuf(t, r, n), nanBuf(t, r, ns), nanBuf(t, r, n)
			if err := s.GatedResidualBackward(gdx, gdg, gdh, gdy, ggate, gh, p, tc.cols); err != nil {
				t.Fatal(err)
			}
			check(t, "gated dx", download(t, gdx), dx)
			check(t, "gated dgate", download(t, gdg), dgate)
			check(t, "gated dh", download(t, gdh), dh)
		})
	}
}

// TestNormArgs checks argument errors of this file's launchers.
func TestNormArgs(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	a, err := r.Alloc(4 * 12)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	p, err := s.NewPacking([]int{0, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	for name, err := range map[string]error{
		"RMSNorm w":             s.RMSNorm(a, cuda.Buffer{}, a, a, 3, 4, 1e-6),
		"LayerNormBackward":     s.LayerNormBackward(a, a, a, a, a, 3, 4),
		"GroupNormSiLU groups":  s.GroupNormSiLU(a, cuda.Buffer{}, cuda.Buffer{}, a, a, a, 1, 3, 4, 3, 1e-5),
		"Modulate shift":        s.Modulate(a, a, a, a, p, 4),
		"GatedResidual nil":     s.GatedResidual(a, a, a, a, nil, 4),
		"GroupNormSiLUBackward": s.GroupNormSiLUBackward(a, cuda.Buffer{}, cuda.Buffer{}, a, a, a, a, a, a, 1, 3, 4, 2),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

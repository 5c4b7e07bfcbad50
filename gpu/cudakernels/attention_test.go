package cudakernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dcdit/dcdit/gpu/cuda"
	cpu "github.com/dcdit/dcdit/kernels"
)

// attnBwdTol bounds the attention backward pass's error: each gradient is
// a sum over a whole sequence of products of recomputed probabilities, so
// float32 rounding in a different order than the CPU's GEMMs costs more
// than the forward pass's single normalised sum.
const attnBwdTol = 1e-4

// offsetsOf packs sequences of the given lengths back to back.
func offsetsOf(lengths []int) []int {
	off := make([]int, len(lengths)+1)
	for i, l := range lengths {
		off[i+1] = off[i] + l
	}
	return off
}

// nanSlice is n NaNs: outputs start as NaN so that an element a kernel
// fails to write shows up in the comparison.
func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// columns extracts columns [c0, c0+w) of every row of an [n, ld] matrix.
func columns(x []float32, n, ld, c0, w int) []float32 {
	out := make([]float32, 0, n*w)
	for r := 0; r < n; r++ {
		out = append(out, x[r*ld+c0:r*ld+c0+w]...)
	}
	return out
}

// attnCase is one attention problem with its CPU results.
type attnCase struct {
	offsets        []int
	heads, d       int
	scale          float32
	qkv, dout      []float32
	out, lse, dqkv []float32
	cpuFwd, cpuBwd time.Duration
}

// newAttnCase draws inputs and runs the CPU kernels on them.
func newAttnCase(rng *rand.Rand, lengths []int, heads, d int, spread float64) *attnCase {
	c := &attnCase{offsets: offsetsOf(lengths), heads: heads, d: d, scale: float32(1 / math.Sqrt(float64(d)))}
	n, hd := c.offsets[len(c.offsets)-1], heads*d
	c.qkv = randSlice(rng, n*3*hd, spread, 0)
	c.dout = randSlice(rng, n*hd, 1, 0)
	c.out, c.lse, c.dqkv = make([]float32, n*hd), make([]float32, n*heads), make([]float32, n*3*hd)
	ws := make([]float32, cpu.AttentionScratch(c.offsets, heads, d))
	t0 := time.Now()
	cpu.AttentionForward(c.out, c.lse, c.qkv, c.offsets, heads, d, c.scale, ws)
	c.cpuFwd = time.Since(t0)
	t0 = time.Now()
	cpu.AttentionBackward(c.dqkv, c.dout, c.out, c.lse, c.qkv, c.offsets, heads, d, c.scale, ws)
	c.cpuBwd = time.Since(t0)
	return c
}

// attnDevice is an attnCase's buffers on the device.
type attnDevice struct {
	p                                *Packing
	qkv, dout, out, lse, dqkv, delta cuda.Buffer
}

func (c *attnCase) upload(t testing.TB, r *cuda.Runtime, s *Set) *attnDevice {
	t.Helper()
	n, hd := c.offsets[len(c.offsets)-1], c.heads*c.d
	p, err := s.NewPacking(c.offsets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Free() })
	return &attnDevice{
		p:    p,
		qkv:  upload(t, r, c.qkv),
		dout: upload(t, r, c.dout),
		out:  upload(t, r, nanSlice(n*hd)),
		lse:  upload(t, r, nanSlice(n*c.heads)),
		dqkv: upload(t, r, nanSlice(n*3*hd)),
		// The backward pass reads delta only where it wrote it first.
		delta: upload(t, r, nanSlice(n*c.heads)),
	}
}

func (c *attnCase) forward(s *Set, g *attnDevice) error {
	return s.AttentionForward(g.out, g.lse, g.qkv, g.p, c.heads, c.d, c.scale)
}

func (c *attnCase) backward(s *Set, g *attnDevice) error {
	return s.AttentionBackward(g.dqkv, g.delta, g.dout, g.out, g.lse, g.qkv, g.p, c.heads, c.d, c.scale)
}

// compare checks the device results against the CPU's: out and lse within
// tol, dq, dk and dv (each separately) within attnBwdTol.
func (c *attnCase) compare(t *testing.T, g *attnDevice) {
	t.Helper()
	n, hd := c.offsets[len(c.offsets)-1], c.heads*c.d
	check(t, "out", download(t, g.out), c.out)
	check(t, "lse", download(t, g.lse), c.lse)
	got := download(t, g.dqkv)
	for i, name := range []string{"dq", "dk", "dv"} {
		checkTol(t, name, columns(got, n, 3*hd, i*hd, hd), columns(c.dqkv, n, 3*hd, i*hd, hd), attnBwdTol)
	}
}

// TestAttention compares the packed attention forward and backward passes
// with kernels.AttentionForward/Backward on one pack of sequences of
// lengths 1, 7, 0 (skipped), 64, 200 and 257 (short, exactly one tile,
// and ragged last tiles of both the 64-row blocks and the 32-row
// key/query tiles), for head dimensions that fill a register width (32,
// 64, 128), pad it (10, 72) and with several heads.
func TestAttention(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(21, 22))
	lengths := []int{1, 7, 0, 64, 200, 257}
	for _, tc := range []struct {
		heads, d int
		spread   float64 // standard deviation of q, k, v: larger is peakier
	}{
		{1, 10, 1}, {2, 32, 1.5}, {3, 64, 1.5}, {2, 72, 1.5}, {1, 128, 1}, {2, 64, 4},
	} {
		t.Run(fmt.Sprintf("heads%d/d%d/spread%g", tc.heads, tc.d, tc.spread), func(t *testing.T) {
			m, err := s.AttentionModule(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("module %s for d = %d: from cache %v, NVRTC %v, load %v", m.Name, tc.d, m.FromCache, m.CompileTime, m.LoadTime)
			c := newAttnCase(rng, lengths, tc.heads, tc.d, tc.spread)
			g := c.upload(t, r, s)
			if err := c.forward(s, g); err != nil {
				t.Fatal(err)
			}
			if err := c.backward(s, g); err != nil {
				t.Fatal(err)
			}
			c.compare(t, g)
		})
	}
}

// TestAttentionArgs checks the attention launchers' argument errors.
func TestAttentionArgs(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	if _, err := s.NewPacking([]int{1, 3}); err == nil {
		t.Error("NewPacking with offsets[0] = 1: no error")
	}
	if _, err := s.NewPacking([]int{0, 5, 3}); err == nil {
		t.Error("NewPacking with decreasing offsets: no error")
	}
	p, err := s.NewPacking([]int{0, 3, 5})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	small, err := r.Alloc(4 * 10)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	big, err := r.Alloc(4 * 5 * 3 * 2 * 200)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Free()
	_, modErr := s.AttentionModule(MaxHeadDim + 1)
	for name, err := range map[string]error{
		"module for 129": modErr,
		"short qkv":      s.AttentionForward(big, big, small, p, 2, 8, 1),
		"head dim 200":   s.AttentionForward(big, big, big, p, 1, 200, 1),
		"zero heads":     s.AttentionForward(big, big, big, p, 0, 8, 1),
		"nil packing":    s.AttentionForward(big, big, big, nil, 1, 8, 1),
		"short delta":    s.AttentionBackward(big, small, big, big, big, big, p, 3, 8, 1),
		"bwd head dim 0": s.AttentionBackward(big, big, big, big, big, big, p, 1, 0, 1),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestAttentionDiTXL times the forward and backward passes on DiT-XL/2
// packs (16 heads × 72; 32 sequences × 256 tokens at 256 px, 8 × 1024 at
// 512 px, and a ragged pack of DC-DiT-like lengths) and checks them
// against the CPU kernels run on the same inputs.
func TestAttentionDiTXL(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the CPU reference takes seconds")
	}
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(23, 24))
	repeat := func(n, l int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = l
		}
		return out
	}
	ragged := make([]int, 32)
	for i := range ragged {
		ragged[i] = 64 + rng.IntN(193) // 64..256 tokens
	}
	for _, tc := range []struct {
		name    string
		lengths []int
	}{
		{"32x256", repeat(32, 256)}, {"8x1024", repeat(8, 1024)}, {"ragged32", ragged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const heads, d = 16, 72
			c := newAttnCase(rng, tc.lengths, heads, d, 1)
			g := c.upload(t, r, s)
			const iters = 20
			timeIt := func(f func() error) time.Duration {
				if err := f(); err != nil { // warm-up (and first-use compile)
					t.Fatal(err)
				}
				if err := r.Synchronize(); err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				for i := 0; i < iters; i++ {
					if err := f(); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Synchronize(); err != nil {
					t.Fatal(err)
				}
				return time.Since(t0) / iters
			}
			fwd := timeIt(func() error { return c.forward(s, g) })
			bwd := timeIt(func() error { return c.backward(s, g) })
			// Nominal FLOPs: 2 products of 2·L²·d per (sequence, head)
			// forward, 5 backward (the kernels recompute two more).
			var pairs float64
			for _, l := range tc.lengths {
				pairs += float64(l) * float64(l)
			}
			flop := 2 * pairs * d * heads
			t.Logf("GPU forward %v (%.1f TFLOP/s), backward %v (%.1f TFLOP/s nominal); CPU forward %v, backward %v",
				fwd, 2*flop/fwd.Seconds()/1e12, bwd, 5*flop/bwd.Seconds()/1e12, c.cpuFwd, c.cpuBwd)
			c.compare(t, g)
		})
	}
}

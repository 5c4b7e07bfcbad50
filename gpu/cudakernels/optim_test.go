package cudakernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/optim"
)

// optimTol bounds the optimiser kernels' error. They round every operation
// as optim's loops do, so they are expected to be bit-identical; the bound
// leaves room for a 1-ulp difference in the clipping factor, whose norm
// is summed in another order.
const optimTol = 1e-6

// TestAdamW runs several AdamW steps on the device and with optim.AdamW
// (every element trainable, PyTorch's defaults and a second set with a
// larger rate and decay) and compares the parameters and both moments
// after every step.
func TestAdamW(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct {
		n int
		h optim.Hyper
	}{
		{1, optim.DefaultHyper()},
		{1<<20 + 3, optim.DefaultHyper()},
		{10007, optim.Hyper{LR: 3e-2, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1}},
	} {
		t.Run(fmt.Sprintf("n%d/lr%g", tc.n, tc.h.LR), func(t *testing.T) {
			ref, err := optim.NewAdamW(optim.AllTrainable(tc.n), tc.h)
			if err != nil {
				t.Fatal(err)
			}
			params := randSlice(rng, tc.n, 1, 0)
			gp := upload(t, r, params)
			gg := upload(t, r, make([]float32, tc.n))
			gm, gv := upload(t, r, make([]float32, tc.n)), upload(t, r, make([]float32, tc.n))
			for step := int64(1); step <= 5; step++ {
				grads := randSlice(rng, tc.n, 0.1, 0)
				if err := cuda.CopyFromHost(gg, grads); err != nil {
					t.Fatal(err)
				}
				if err := s.AdamW(gp, gg, gm, gv, optim.NewAdamWScalars(tc.h, step)); err != nil {
					t.Fatal(err)
				}
				ref.Step(params, grads)
				st := ref.State()
				if step == 1 || step == 5 {
					check(t, fmt.Sprintf("step %d params", step), download(t, gp), params)
					check(t, fmt.Sprintf("step %d m", step), download(t, gm), st.M)
					check(t, fmt.Sprintf("step %d v", step), download(t, gv), st.V)
					got := download(t, gp)
					diff := 0
					for i := range got {
						if got[i] != params[i] {
							diff++
						}
					}
					t.Logf("step %d: %d of %d parameters differ from optim's bits", step, diff, tc.n)
				}
			}
		})
	}
}

// TestEMA compares three EMA updates with optim.EMA.
func TestEMA(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(43, 44))
	const n = 100003
	params := randSlice(rng, n, 1, 0)
	ref, err := optim.NewEMA(optim.AllTrainable(n), params, 0.999)
	if err != nil {
		t.Fatal(err)
	}
	ge := upload(t, r, params)
	gp := upload(t, r, params)
	for i := 0; i < 3; i++ {
		params = randSlice(rng, n, 1, 0)
		if err := cuda.CopyFromHost(gp, params); err != nil {
			t.Fatal(err)
		}
		if err := s.EMA(ge, gp, ref.Decay); err != nil {
			t.Fatal(err)
		}
		ref.Update(params)
	}
	check(t, "ema", download(t, ge), ref.Weights())
	if err := s.EMA(ge, gp, 1.5); err == nil {
		t.Error("EMA with decay 1.5: no error")
	}
}

// TestClipGradNorm compares GradNorm and ClipGradNorm with
// optim.GradClipper: a norm above the limit (scaled), below it
// (untouched), an empty buffer, and a NaN gradient (untouched, reported
// by ReadNorm as optim.ErrNonFiniteNorm).
func TestClipGradNorm(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(45, 46))
	work, err := r.Alloc(ClipWorkBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer work.Free()
	for _, tc := range []struct {
		name    string
		n       int
		maxNorm float64
		nan     bool
	}{
		{"clipped", 3<<20 + 5, 1, false},
		{"below", 1000, 1e6, false},
		{"one", 1, 0.5, false},
		{"nan", 4097, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grads := randSlice(rng, tc.n, 0.01, 0)
			if tc.nan {
				grads[tc.n/2] = float32(math.NaN())
			}
			g := upload(t, r, grads)
			if err := s.ClipGradNorm(work, g, tc.maxNorm); err != nil {
				t.Fatal(err)
			}
			got, nerr := ReadNorm(work)
			clip := optim.NewGradClipper(optim.AllTrainable(tc.n), tc.maxNorm)
			want, werr := clip.Clip(grads)
			if tc.nan {
				if !errors.Is(nerr, optim.ErrNonFiniteNorm) || werr == nil {
					t.Fatalf("NaN gradient: ReadNorm error %v, optim error %v; want both to report it", nerr, werr)
				}
			} else if nerr != nil || werr != nil {
				t.Fatal(nerr, werr)
			}
			if e := math.Abs(got-want) / want; !(e <= 1e-12) && !tc.nan {
				t.Errorf("norm %v, optim %v: relative error %.3g", got, want, e)
			} else {
				t.Logf("norm %v, optim %v", got, want)
			}
			out := download(t, g)
			if tc.nan {
				// NaN ≠ NaN: compare the other elements, which must be untouched.
				out[tc.n/2], grads[tc.n/2] = 0, 0
			}
			checkTol(t, "grads", out, grads, optimTol)
		})
	}
	empty := cuda.Buffer{}
	if err := s.GradNorm(work, empty); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadNorm(work); err != nil || v != 0 {
		t.Errorf("norm of nothing: %v, %v; want 0", v, err)
	}
	if err := s.ClipGradNorm(work, empty, 0); err == nil {
		t.Error("max norm 0: no error")
	}
	short, err := work.Slice(0, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.GradNorm(short, empty); err == nil {
		t.Error("short work buffer: no error")
	}
}

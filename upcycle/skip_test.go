package upcycle

import (
	"math"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/ops"
)

func TestSolveSPD(t *testing.T) {
	// A = Mᵀ·M + I for a fixed M, b = A·x for a known x.
	const n = 5
	A := make([]float64, n*n)
	for i := range n {
		for j := range n {
			for k := range n {
				A[i*n+j] += float64((i+2*k)%3-1) * float64((j+2*k)%3-1)
			}
		}
		A[i*n+i]++
	}
	x := []float64{1, -2, 0.5, 3, -1}
	b := make([]float64, n)
	for i := range n {
		for j := range n {
			b[i] += A[i*n+j] * x[j]
		}
	}
	got, err := solveSPD(A, b, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if !(math.Abs(got[i]-x[i]) <= 1e-9) {
			t.Fatalf("x = %v, want %v", got, x)
		}
	}
	if _, err := solveSPD([]float64{1, 2, 2, 1}, []float64{1, 1}, 2); err == nil {
		t.Error("an indefinite matrix solved")
	}
}

// The fitted scale follows the process's noise scale, for every class,
// and only on the noise outputs. The test teacher's random conditioning
// mixes class and time, so the fit is within 15% here (the bundled
// teacher's: within 12% from t = 50 on, 23% at t = 10); unfitted, the
// scale would be 1, 30% off at t = 200.
func TestLatentSkipPrior(t *testing.T) {
	tm := teacher(t, 3)
	s := DefaultScaffold()
	s.NormGroups, s.WidthFactor, s.PatchSize, s.LatentSkip = 8, 8, 2, true
	m, err := graftDiT(tm, s, 4)
	if err != nil {
		t.Fatal(err)
	}
	times := make([]float32, 1000)
	for i := range times {
		times[i] = float32(i)
	}
	scale := func(t float32) float64 { return 1 / math.Sqrt(1-math.Exp(-float64(t+1)/300)) }
	if err := LatentSkipPrior(m, LabelInputs(times, tm.Config.NumClasses), scale); err != nil {
		t.Fatal(err)
	}
	for _, y := range []int{0, tm.Config.NumClasses} {
		for _, tv := range []float32{200, 500, 900} {
			cv, err := m.Backbone.Condition(cond.Input{T: []float32{tv}, Labels: []int{y}})
			if err != nil {
				t.Fatal(err)
			}
			got := data(ops.Linear(ops.SiLU(cv.Vector()), m.Params.Get("latent_skip.scale.weight"), m.Params.Get("latent_skip.scale.bias")))
			want := scale(tv) - 1
			if !(math.Abs(float64(got[0])-want) <= 0.15*(want+1)) {
				t.Errorf("class %d, t %g: scale %.3f, want %.3f", y, tv, 1+got[0], want+1)
			}
			if got[m.Config.CellIn()] != 0 {
				t.Errorf("class %d, t %g: a variance output's scale moved: %g", y, tv, got[m.Config.CellIn()])
			}
		}
	}

	s.LatentSkip = false
	plain, err := graftDiT(tm, s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := LatentSkipPrior(plain, LabelInputs(times, 5), scale); err == nil || !strings.Contains(err.Error(), "no latent skip") {
		t.Errorf("model without a skip: err = %v", err)
	}
	for name, bad := range map[string]func(float32) float64{
		"NaN":        func(float32) float64 { return math.NaN() },
		"both signs": func(t float32) float64 { return float64(t) - 500.5 },
	} {
		if err := LatentSkipPrior(m, LabelInputs(times, 5), bad); err == nil || !strings.Contains(err.Error(), "want a finite number of one sign") {
			t.Errorf("%s scale: err = %v", name, err)
		}
	}
}

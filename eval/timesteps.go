package eval

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/dcdit/dcdit/diffusion/ddpm"
)

// TimestepRow is the one-step error at one timestep, the first ρ row's
// fraction, unguided: the held-out inputs' clean samples all noised to t
// (the same noise for both models), each model's ε prediction against the
// noise drawn and against each other. Sampling amplifies these errors in
// opposite ways at the two ends: at high t an ε error becomes an x̂0 error
// √((1−ᾱ)/ᾱ) times larger, at low t a model that cannot see a cell's noise
// shrinks ε̂ (slope < 1) and every step leaves noise behind.
type TimestepRow struct {
	T   int     `json:"t"`
	Rho float64 `json:"rho"`
	// EpsMSE and TeacherEpsMSE are the mean squared errors of the ε
	// channels against the noise drawn; EpsMSEToTeacher the DC model's
	// against the teacher's.
	EpsMSE          float64 `json:"eps_mse"`
	TeacherEpsMSE   float64 `json:"teacher_eps_mse"`
	EpsMSEToTeacher float64 `json:"eps_mse_to_teacher"`
	// EpsSlope is the least-squares slope of the DC model's ε̂ on the
	// teacher's, Σ ε̂_dc·ε̂_t / Σ ε̂_t² (1: no shrinkage).
	EpsSlope float64 `json:"eps_slope"`
	// X0ClassAccuracy and TeacherX0ClassAccuracy (with a feature network)
	// are the fractions of x̂0 = (x_t − √(1−ᾱ)·ε̂)/√ᾱ classified as the
	// sample's label: what the model knows of the shape at t.
	X0ClassAccuracy        *float64 `json:"x0_class_accuracy"`
	TeacherX0ClassAccuracy *float64 `json:"teacher_x0_class_accuracy"`
}

// timesteps fills Report.PerTimestep at the first ρ.
func (e *evaluator) timesteps() error {
	sched := ddpm.Linear(e.o.DiffusionSteps)
	rho := e.o.Rhos[0]
	for i, tv := range e.o.ProbeTimesteps {
		t := make([]int, e.nIn)
		for j := range t {
			t[j] = tv
		}
		stream := probeStream + uint64(i)
		noise := e.noise(stream, e.nIn*e.n)
		xt, tm, y, err := e.noised(e.nIn, t, stream)
		if err != nil {
			return err
		}
		dcEps := make([]float32, 0, len(xt))
		tEps := make([]float32, 0, len(xt))
		for lo := 0; lo < e.nIn; lo += e.o.BatchSize {
			hi := min(lo+e.o.BatchSize, e.nIn)
			x := xt[lo*e.n : hi*e.n]
			out, _, err := e.forward(setting{cond: rho}, x, tm[lo:hi], y[lo:hi])
			if err != nil {
				return fmt.Errorf("eval: t = %d: %w", tv, err)
			}
			dcEps = append(dcEps, e.epsOf(out, hi-lo)...)
			ref, err := e.teacherForward(x, tm[lo:hi], y[lo:hi], 0)
			if err != nil {
				return fmt.Errorf("eval: teacher at t = %d: %w", tv, err)
			}
			tEps = append(tEps, e.epsOf(ref, hi-lo)...)
			e.step()
		}
		row := TimestepRow{T: tv, Rho: rho, EpsMSE: mse(dcEps, noise), TeacherEpsMSE: mse(tEps, noise), EpsMSEToTeacher: mse(dcEps, tEps)}
		var st, tt float64
		for j, v := range tEps {
			st += float64(dcEps[j]) * float64(v)
			tt += float64(v) * float64(v)
		}
		row.EpsSlope = st / tt
		if e.o.Features != nil {
			a, sa := math.Sqrt(sched.AlphasCumprod[tv]), math.Sqrt(1-sched.AlphasCumprod[tv])
			if row.X0ClassAccuracy, err = e.x0Accuracy(xt, dcEps, y, a, sa); err != nil {
				return err
			}
			if row.TeacherX0ClassAccuracy, err = e.x0Accuracy(xt, tEps, y, a, sa); err != nil {
				return err
			}
		}
		e.r.PerTimestep = append(e.r.PerTimestep, row)
	}
	return nil
}

// probeStream is the first noise stream of the per-timestep inputs, apart
// from the other held-out inputs' (1, 100+, 200+).
const probeStream = 300

// x0Accuracy classifies x̂0 = (x_t − sa·ε̂)/a.
func (e *evaluator) x0Accuracy(xt, eps []float32, y []int, a, sa float64) (*float64, error) {
	x0 := make([]float32, len(xt))
	for i, v := range xt {
		x0[i] = float32((float64(v) - sa*float64(eps[i])) / a)
	}
	classes, err := e.o.Features.Classify(x0, len(y), e.cfg.InChannels, e.cfg.GridRows, e.cfg.GridCols)
	if err != nil {
		return nil, fmt.Errorf("eval: feature network on x̂0: %w", err)
	}
	correct := 0
	for i, c := range classes {
		if c == y[i] {
			correct++
		}
	}
	acc := float64(correct) / float64(len(y))
	return &acc, nil
}

// mse is the mean of (a − b)².
func mse(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return s / float64(len(a))
}

// writeTimesteps prints the per-timestep table.
func (r *Report) writeTimesteps(w io.Writer) error {
	if len(r.PerTimestep) == 0 {
		return nil
	}
	fmt.Fprintf(w, "one-step error by timestep (ρ = %g, unguided, %d held-out samples noised to t):\n", r.PerTimestep[0].Rho, r.NumInputs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t\tε MSE\tteacher\tto teacher\tslope\tx̂0 acc\tteacher\t\n")
	for _, p := range r.PerTimestep {
		fmt.Fprintf(tw, "%d\t%.4g\t%.4g\t%.4g\t%.3f\t%s\t%s\t\n", p.T, p.EpsMSE, p.TeacherEpsMSE, p.EpsMSEToTeacher, p.EpsSlope,
			optional(p.X0ClassAccuracy, "%.2f"), optional(p.TeacherX0ClassAccuracy, "%.2f"))
	}
	return tw.Flush()
}

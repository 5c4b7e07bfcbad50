package flowmatch

import (
	"fmt"
	"math"
)

// Float is the element type of the arrays: float32 for work, float64 for
// gradient checks.
type Float interface{ ~float32 | ~float64 }

// Table is the training scheduler's 1000-entry (num_train_timesteps)
// table, descending: entry 0 is pure noise. Training draws an index into
// it rather than a continuous σ, so the σ a sample sees is one of these
// values exactly.
type Table struct {
	// Sigmas are shift(k/T) for k = T, T−1, …, 1, in float32.
	Sigmas []float32
	// Timesteps are Sigmas·T in float32.
	Timesteps []float32
}

// TrainingTable builds the table the scheduler's constructor builds, all
// in float32 as PyTorch computes it: σ = linspace(1, T, T)[::-1]/T, shifted.
func (c Config) TrainingTable() (*Table, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	T := c.NumTrainTimesteps
	tb := &Table{Sigmas: make([]float32, T), Timesteps: make([]float32, T)}
	for i := range T {
		s := Shift32(float32(T-i)/float32(T), c.Shift)
		tb.Sigmas[i], tb.Timesteps[i] = s, s*float32(T)
	}
	return tb, nil
}

// Index maps a density sample u ∈ [0, 1) to a table index as the training
// script does, (u·T).long(): the product is rounded to float32 before it
// is truncated, so u just below 1 can land on the last entry.
func (tb *Table) Index(u float32) (int, error) {
	T := len(tb.Sigmas)
	v := u * float32(T)
	if !(v >= 0 && v < float32(T)) {
		return 0, fmt.Errorf("flowmatch: density sample u = %v gives index %v outside [0, %d)", u, v, T)
	}
	return int(v), nil
}

// Lookup returns the σ and timestep of each index. The training script
// finds σ by matching the timestep in the table, which, the timesteps
// being distinct, is the entry at the index itself.
func (tb *Table) Lookup(indices []int) (sigmas, timesteps []float32, err error) {
	sigmas, timesteps = make([]float32, len(indices)), make([]float32, len(indices))
	for i, k := range indices {
		if k < 0 || k >= len(tb.Sigmas) {
			return nil, nil, fmt.Errorf("flowmatch: table index %d of sample %d outside [0, %d)", k, i, len(tb.Sigmas))
		}
		sigmas[i], timesteps[i] = tb.Sigmas[k], tb.Timesteps[k]
	}
	return sigmas, timesteps, nil
}

// perSample returns the per-sample length of arrays of total length n
// split over len(sigmas) samples, or an error naming the array.
func perSample(op, name string, n, batch int) (int, error) {
	if batch < 1 || n%batch != 0 {
		return 0, fmt.Errorf("flowmatch: %s: %s has %d values, not a whole number of samples for a batch of %d", op, name, n, batch)
	}
	return n / batch, nil
}

func sameLen(op string, want int, arrays map[string]int) error {
	for name, n := range arrays {
		if n != want {
			return fmt.Errorf("flowmatch: %s: %s has %d values, want %d", op, name, n, want)
		}
	}
	return nil
}

// QSample writes x_σ = (1 − σ)·x0 + σ·noise, one σ per sample, in float32
// with every product rounded as PyTorch does.
func QSample(dst, x0, noise, sigmas []float32) error {
	n, err := perSample("q_sample", "x0", len(x0), len(sigmas))
	if err != nil {
		return err
	}
	if err := sameLen("q_sample", len(x0), map[string]int{"dst": len(dst), "noise": len(noise)}); err != nil {
		return err
	}
	qSample(dst, x0, noise, sigmas, n)
	return nil
}

func qSample[T Float](dst, x0, noise, sigmas []T, n int) {
	for b, s := range sigmas {
		keep := 1 - s
		for i := b * n; i < (b+1)*n; i++ {
			dst[i] = T(keep*x0[i]) + T(s*noise[i])
		}
	}
}

// Target writes the regression target noise − x0: the velocity from data
// to noise, which the negated model output is compared with.
func Target(dst, x0, noise []float32) error {
	if err := sameLen("target", len(x0), map[string]int{"dst": len(dst), "noise": len(noise)}); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = noise[i] - x0[i]
	}
	return nil
}

// Loss is the flow-matching loss of raw model outputs against targets
// (weighting scheme "none"): per sample the mean over C·H·W of
// (−raw − target)², and their mean over the batch.
type Loss struct {
	// PerSample holds each sample's mean squared error (loss_per_sample).
	PerSample []float32
	// Mean is their batch mean, the value training minimises.
	Mean float32
}

// TrainingLoss evaluates the loss for a batch of batch samples. If grad is
// not nil it receives ∂Mean/∂raw, 2·(raw + target)/(B·n): the gradient
// that flows back into the transformer, the negation included. Sums are
// accumulated in float64.
func TrainingLoss(grad, raw, target []float32, batch int) (*Loss, error) {
	n, err := perSample("loss", "raw model output", len(raw), batch)
	if err != nil {
		return nil, err
	}
	arrays := map[string]int{"target": len(target)}
	if grad != nil {
		arrays["grad"] = len(grad)
	}
	if err := sameLen("loss", len(raw), arrays); err != nil {
		return nil, err
	}
	l := &Loss{PerSample: make([]float32, batch)}
	per := make([]float64, batch)
	mean := trainingLoss(per, grad, raw, target, n)
	for b, v := range per {
		l.PerSample[b] = float32(v)
	}
	l.Mean = float32(mean)
	return l, nil
}

func trainingLoss[T Float](per []float64, grad, raw, target []T, n int) float64 {
	B := len(per)
	var mean float64
	for b := range B {
		var sum float64
		for i := b * n; i < (b+1)*n; i++ {
			d := float64(-raw[i]) - float64(target[i])
			sum += d * d
			if grad != nil {
				// d(d²)/d raw = −2d; each term weighs 1/n in the sample's
				// mean and 1/B in the batch mean.
				grad[i] = T(-2 * d / float64(n*B))
			}
		}
		per[b] = sum / float64(n)
		mean += per[b]
	}
	return mean / float64(B)
}

// isFinite reports whether v holds only finite values, for rejecting a
// model output before it poisons a whole trajectory.
func isFinite(v []float32) (int, bool) {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i, false
		}
	}
	return -1, true
}

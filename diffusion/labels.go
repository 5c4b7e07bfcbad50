package diffusion

import "fmt"

// LabelModel is a class-conditional network as a sampler calls it: latents
// x ([B, C, HW]), one model time per sample (Process.ModelTimes'
// convention) and one class label per sample. It returns the raw output
// [B, OutChannels(C), HW].
type LabelModel func(x, t []float32, y []int) ([]float32, error)

// WithLabels makes the Model a Process samples for a class-conditional
// network (DiT, DC-DiT) and a batch of labels: an unguided call labels
// its rows labels, and a guided (doubled) call labels them
// [labels; null …], the unconditional half the null class, as DiT's
// classifier-free guidance does (ddpm.Guidance). It is the conditioning
// half of the Model contract for labels; captions are their backbone's.
func WithLabels(f LabelModel, labels []int, null int) Model {
	guidedLabels := append(make([]int, 0, 2*len(labels)), labels...)
	for range labels {
		guidedLabels = append(guidedLabels, null)
	}
	return func(x, t []float32, guided bool) ([]float32, error) {
		y := labels
		if guided {
			y = guidedLabels
		}
		if len(t) != len(y) {
			return nil, fmt.Errorf("diffusion: %d model times for %d labels (guided %v)", len(t), len(y), guided)
		}
		return f(x, t, y)
	}
}

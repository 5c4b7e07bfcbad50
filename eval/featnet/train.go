package featnet

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
)

// TrainOptions configure Train. Zero fields take the defaults of
// DefaultTrainOptions, except Progress.
type TrainOptions struct {
	Config Config // architecture (zero: DefaultConfig)
	Seed   uint64 // training data seed and weight/order/noise streams
	Size   int    // latent side of the training data
	// Samples is the training set's size (shapes samples 0..Samples−1 of
	// Seed); epochs reshuffle it.
	Samples int
	Steps   int
	Batch   int
	LR      float64 // AdamW peak learning rate (linear warm-up, cosine decay to 0)
	// NoiseSigma is the largest standard deviation of the Gaussian noise
	// added to training latents; each sample draws its own σ uniformly in
	// [0, NoiseSigma], so the network sees clean and slightly noisy data.
	NoiseSigma float64
	// HeldOutSeed and HeldOutSamples choose the held-out set whose accuracy
	// the report (and the weights' metadata) gives.
	HeldOutSeed    uint64
	HeldOutSamples int
	// Progress, if set, is called after every step with the step (1-based)
	// and the batch's mean cross-entropy.
	Progress func(step int, loss float64)
}

// DefaultTrainOptions are the options that made the bundled weights.
func DefaultTrainOptions() TrainOptions {
	return TrainOptions{
		Config: DefaultConfig(), Seed: 1, Size: shapes.DefaultSize,
		Samples: 16384, Steps: 1000, Batch: 64, LR: 2e-3, NoiseSigma: 0.2,
		HeldOutSeed: DefaultHeldOutSeed, HeldOutSamples: 4096,
	}
}

// DefaultHeldOutSeed is the shapes seed of the held-out data that the
// bundled network's accuracy is measured on; no training data of the
// project uses it.
const DefaultHeldOutSeed = 0xfea7_0001

// withDefaults fills the zero fields.
func (o TrainOptions) withDefaults() TrainOptions {
	d := DefaultTrainOptions()
	if o.Config.Widths == nil && o.Config.InChannels == 0 {
		o.Config = d.Config
	}
	if o.Size == 0 {
		o.Size = d.Size
	}
	if o.Samples == 0 {
		o.Samples = d.Samples
	}
	if o.Steps == 0 {
		o.Steps = d.Steps
	}
	if o.Batch == 0 {
		o.Batch = d.Batch
	}
	if o.LR == 0 {
		o.LR = d.LR
	}
	if o.HeldOutSamples == 0 {
		o.HeldOutSamples = d.HeldOutSamples
	}
	return o
}

// Info is a trained network's provenance, stored in its weights file.
type Info struct {
	Dataset         string  `json:"dataset"` // shapes.Version of the training data
	Seed            uint64  `json:"seed"`
	Size            int     `json:"size"`
	TrainSamples    int     `json:"train_samples"`
	Steps           int     `json:"steps"`
	Batch           int     `json:"batch"`
	LR              float64 `json:"lr"`
	NoiseSigma      float64 `json:"noise_sigma"`
	HeldOutSeed     uint64  `json:"heldout_seed"`
	HeldOutSamples  int     `json:"heldout_samples"`
	HeldOutAccuracy float64 `json:"heldout_accuracy"`
	// NoisyAccuracy is the held-out accuracy with σ = NoiseSigma noise.
	NoisyAccuracy float64 `json:"heldout_accuracy_noisy"`
}

// Report is what Train measured.
type Report struct {
	Info
	FinalLoss float64       // mean cross-entropy of the last 50 steps
	Duration  time.Duration // training and held-out evaluation
	Params    int
}

// rng is a PCG stream with helpers built on PCG's Uint64 alone: math/rand's
// derived methods (NormFloat64, Shuffle) are not promised to give the same
// values in every Go version.
type rng struct{ pcg *rand.PCG }

func newRNG(seed, stream uint64) rng { return rng{rand.NewPCG(seed, stream)} }

// float returns a uniform value in [0, 1) with 53 random bits.
func (r rng) float() float64 { return float64(r.pcg.Uint64()>>11) / (1 << 53) }

// normal returns a standard normal value (Box–Muller, the cosine branch
// only, so that every call consumes exactly two draws).
func (r rng) normal() float64 {
	u1 := 1 - r.float() // (0, 1]: log is finite
	u2 := r.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// intn returns a value in [0, n) (modulo bias is negligible for n ≪ 2⁶⁴).
func (r rng) intn(n int) int { return int(r.pcg.Uint64() % uint64(n)) }

// shuffle permutes p (Fisher–Yates).
func (r rng) shuffle(p []int) {
	for i := len(p) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}

// Streams of the training seed, one per use, so that changing one use (the
// noise, say) leaves the others' draws unchanged.
const (
	streamInit  = 0xfea7_1417
	streamOrder = 0xfea7_0bde
	streamNoise = 0xfea7_2015
)

// initWeights draws the initial weights: He-normal for every conv and
// linear weight (std √(2/fan-in)), zero biases, GroupNorm γ = 1 and β = 0,
// and a head scaled down by 10 so that the first logits are near uniform.
func (n *Net) initWeights(seed uint64) {
	r := newRNG(seed, streamInit)
	for _, s := range n.Config.specs() {
		v := n.p.Get(s.name).Values()
		switch {
		case strings.HasPrefix(s.name, "norm") && strings.HasSuffix(s.name, ".weight"):
			for i := range v {
				v[i] = 1
			}
		case len(s.file) == 1:
			clear(v)
		default:
			std := math.Sqrt(2 / float64(s.cols))
			if s.name == "head.weight" {
				std /= 10
			}
			for i := range v {
				v[i] = float32(std * r.normal())
			}
		}
	}
}

// trainingSet generates samples 0..n−1 of the shapes data of one seed.
func trainingSet(size int, seed uint64, n int) (latents []float32, labels []int, err error) {
	g, err := shapes.New(size, seed)
	if err != nil {
		return nil, nil, err
	}
	per := shapes.Channels * size * size
	latents = make([]float32, n*per)
	labels = make([]int, n)
	for i := range n {
		s := g.Sample(i)
		copy(latents[i*per:], s.Latent)
		labels[i] = s.Label
	}
	return latents, labels, nil
}

// Train trains a network on the shapes data and measures its held-out
// accuracy. The same options give the same weights bit for bit.
func Train(opts TrainOptions) (*Net, Report, error) {
	start := time.Now()
	o := opts.withDefaults()
	switch {
	case o.Size < MinSize:
		return nil, Report{}, fmt.Errorf("featnet: train: size %d, want ≥ %d", o.Size, MinSize)
	case o.Samples < 1 || o.Steps < 1 || o.Batch < 1 || o.HeldOutSamples < 1:
		return nil, Report{}, fmt.Errorf("featnet: train: samples %d, steps %d, batch %d, held-out samples %d: want all ≥ 1", o.Samples, o.Steps, o.Batch, o.HeldOutSamples)
	case !(o.LR > 0) || !(o.NoiseSigma >= 0) || math.IsInf(o.LR, 0) || math.IsInf(o.NoiseSigma, 0):
		return nil, Report{}, fmt.Errorf("featnet: train: lr %v, noise σ %v: want lr > 0 and σ ≥ 0", o.LR, o.NoiseSigma)
	case o.HeldOutSeed == o.Seed:
		return nil, Report{}, errors.New("featnet: train: the held-out seed equals the training seed")
	}
	if o.Config.InChannels != shapes.Channels || o.Config.NumClasses != len(shapes.Classes) {
		return nil, Report{}, fmt.Errorf("featnet: train: config takes %d channels and %d classes; the shapes data has %d and %d",
			o.Config.InChannels, o.Config.NumClasses, shapes.Channels, len(shapes.Classes))
	}
	net, err := newNet(o.Config)
	if err != nil {
		return nil, Report{}, err
	}
	net.initWeights(o.Seed)
	data, labels, err := trainingSet(o.Size, o.Seed, o.Samples)
	if err != nil {
		return nil, Report{}, err
	}

	hy := optim.DefaultHyper()
	hy.LR = o.LR
	mask := optim.AllTrainable(net.p.Len())
	opt, err := optim.NewAdamW(mask, hy)
	if err != nil {
		return nil, Report{}, err
	}
	clip := optim.NewGradClipper(mask, 1)
	warm := max(1, min(100, o.Steps/10))

	c, s := shapes.Channels, o.Size
	per, hw := c*s*s, s*s
	order := make([]int, o.Samples)
	for i := range order {
		order[i] = i
	}
	ordRNG, noiseRNG := newRNG(o.Seed, streamOrder), newRNG(o.Seed, streamNoise)
	pos := o.Samples // forces a shuffle at the first step
	x := make([]float32, o.Batch*per)
	y := make([]int, o.Batch)
	grad := make([]float32, o.Batch*o.Config.NumClasses)
	var recent []float64

	net.p.SetRequiresGrad(true)
	defer net.p.SetRequiresGrad(false)
	for step := 1; step <= o.Steps; step++ {
		lr := o.LR * float64(step) / float64(warm)
		if step > warm {
			lr = o.LR * 0.5 * (1 + math.Cos(math.Pi*float64(step-warm)/float64(o.Steps-warm+1)))
		}
		if err := opt.SetLR(0, lr); err != nil {
			return nil, Report{}, err
		}
		for b := range o.Batch {
			if pos == o.Samples {
				ordRNG.shuffle(order)
				pos = 0
			}
			i := order[pos]
			pos++
			y[b] = labels[i]
			sigma := o.NoiseSigma * noiseRNG.float()
			src := data[i*per : (i+1)*per]
			dst := x[b*per : (b+1)*per]
			// Token-major while adding the noise.
			for ch := range c {
				for l := range hw {
					dst[l*c+ch] = src[ch*hw+l] + float32(sigma*noiseRNG.normal())
				}
			}
		}
		net.p.ZeroGrad()
		xt := mat.NewDense[float32](mat.WithShape(o.Batch*hw, c), mat.WithBacking(x))
		_, logits := net.forward(xt, o.Batch, s, s)
		loss := crossEntropy(grad, mat.Data[float32](logits.Value()), y, o.Config.NumClasses)
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, Report{}, fmt.Errorf("featnet: train: loss %v at step %d", loss, step)
		}
		err := ops.BackwardFrom(logits, append([]float32(nil), grad...))
		ops.Release(logits)
		if err != nil {
			return nil, Report{}, err
		}
		if _, err := clip.Clip(net.p.Grad); err != nil {
			return nil, Report{}, fmt.Errorf("featnet: train: step %d: %w", step, err)
		}
		opt.Step(net.p.Data, net.p.Grad)
		if len(recent) == 50 {
			recent = recent[1:]
		}
		recent = append(recent, loss)
		if o.Progress != nil {
			o.Progress(step, loss)
		}
	}
	net.p.SetRequiresGrad(false)

	info := Info{
		Dataset: shapes.Version, Seed: o.Seed, Size: o.Size, TrainSamples: o.Samples, Steps: o.Steps, Batch: o.Batch,
		LR: o.LR, NoiseSigma: o.NoiseSigma, HeldOutSeed: o.HeldOutSeed, HeldOutSamples: o.HeldOutSamples,
	}
	hx, hy2, err := trainingSet(o.Size, o.HeldOutSeed, o.HeldOutSamples)
	if err != nil {
		return nil, Report{}, err
	}
	if info.HeldOutAccuracy, err = net.Accuracy(hx, hy2, o.HeldOutSamples, c, s, s); err != nil {
		return nil, Report{}, err
	}
	// The noisy check draws from its own stream of the held-out seed, so it
	// does not depend on how long training ran.
	nr := newRNG(o.HeldOutSeed, streamNoise)
	for i := range hx {
		hx[i] += float32(o.NoiseSigma * nr.normal())
	}
	if info.NoisyAccuracy, err = net.Accuracy(hx, hy2, o.HeldOutSamples, c, s, s); err != nil {
		return nil, Report{}, err
	}
	net.Info = info
	var final float64
	for _, l := range recent {
		final += l
	}
	rep := Report{Info: info, FinalLoss: final / float64(len(recent)), Duration: time.Since(start), Params: net.p.Len()}
	return net, rep, nil
}

// crossEntropy returns the batch's mean softmax cross-entropy of logits
// [B, k] against labels and writes its gradient with respect to the
// logits, (softmax − one-hot)/B, into grad. It is computed here rather
// than as an op because nothing upstream of the logits needs more than
// this gradient, which ops.Backward takes as the root's.
func crossEntropy(grad, logits []float32, labels []int, k int) float64 {
	b := len(labels)
	var total float64
	for s, label := range labels {
		row := logits[s*k : (s+1)*k]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - m)
		}
		total += m + math.Log(z) - float64(row[label])
		g := grad[s*k : (s+1)*k]
		for j, v := range row {
			p := math.Exp(float64(v)-m) / z
			if j == label {
				p--
			}
			g[j] = float32(p / float64(b))
		}
	}
	return total / float64(b)
}

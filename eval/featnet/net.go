package featnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// MinSize is the smallest latent side the network accepts: two 2×2 pools
// must leave at least a 2×2 grid for the last stage's GroupNorm to have
// more than one position to normalise over.
const MinSize = 8

// Config is the architecture; it is stored as JSON in the weights file.
type Config struct {
	InChannels int   `json:"in_channels"` // latent channels (4)
	Widths     []int `json:"widths"`      // output channels of conv0 … conv3
	Groups     int   `json:"groups"`      // GroupNorm groups (divides every width)
	FeatureDim int   `json:"feature_dim"` // F, the features' dimension
	NumClasses int   `json:"num_classes"` // logits
}

// DefaultConfig is the bundled network's architecture: about 70k
// parameters, 5.4 MFLOPs per 16×16 latent, small enough to train in a few
// minutes on 2 cores and to bundle (< 300 KB).
func DefaultConfig() Config {
	return Config{InChannels: shapes.Channels, Widths: []int{32, 32, 64, 64}, Groups: 8, FeatureDim: 64, NumClasses: len(shapes.Classes)}
}

// Validate checks that the configuration describes a buildable network.
func (c Config) Validate() error {
	switch {
	case c.InChannels < 1:
		return fmt.Errorf("featnet: config: in_channels %d, want ≥ 1", c.InChannels)
	case len(c.Widths) != 4:
		return fmt.Errorf("featnet: config: %d widths, want 4 (one per conv)", len(c.Widths))
	case c.Groups < 1:
		return fmt.Errorf("featnet: config: groups %d, want ≥ 1", c.Groups)
	case c.FeatureDim < 1:
		return fmt.Errorf("featnet: config: feature_dim %d, want ≥ 1", c.FeatureDim)
	case c.NumClasses < 2:
		return fmt.Errorf("featnet: config: num_classes %d, want ≥ 2", c.NumClasses)
	}
	for i, w := range c.Widths {
		if w < 1 || w%c.Groups != 0 {
			return fmt.Errorf("featnet: config: widths[%d] = %d, want a positive multiple of groups (%d)", i, w, c.Groups)
		}
	}
	return nil
}

// tensorSpec is one weight: its name, its shape in the file (PyTorch's:
// conv weights [cout, cin, 3, 3]) and its shape as a params matrix.
type tensorSpec struct {
	name       string
	file       []int64
	rows, cols int
}

// specs lists the weights in arena order.
func (c Config) specs() []tensorSpec {
	var s []tensorSpec
	conv := func(name string, cin, cout int) {
		s = append(s,
			tensorSpec{name + ".weight", []int64{int64(cout), int64(cin), 3, 3}, cout, cin * 9},
			tensorSpec{name + ".bias", []int64{int64(cout)}, cout, 1})
	}
	norm := func(name string, ch int) {
		s = append(s,
			tensorSpec{name + ".weight", []int64{int64(ch)}, ch, 1},
			tensorSpec{name + ".bias", []int64{int64(ch)}, ch, 1})
	}
	linear := func(name string, in, out int) {
		s = append(s,
			tensorSpec{name + ".weight", []int64{int64(out), int64(in)}, out, in},
			tensorSpec{name + ".bias", []int64{int64(out)}, out, 1})
	}
	w := c.Widths
	conv("conv0", c.InChannels, w[0])
	norm("norm0", w[0])
	conv("conv1", w[0], w[1])
	norm("norm1", w[1])
	conv("conv2", w[1], w[2])
	norm("norm2", w[2])
	conv("conv3", w[2], w[3])
	norm("norm3", w[3])
	linear("feature", w[3], c.FeatureDim)
	linear("head", c.FeatureDim, c.NumClasses)
	return s
}

// groupNormEps is PyTorch's default.
const groupNormEps = 1e-5

// Net is a feature network: its architecture, where its weights came from,
// and the weights. Features and Classify only read the weights, so a Net
// returned by Load may be used from several goroutines at once.
type Net struct {
	Config Config
	// Info is the training provenance (zero for a fresh, untrained net).
	Info Info
	p    *params.Set
}

// newNet allocates a zero-initialised net for a valid config.
func newNet(c Config) (*Net, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var ps []params.Spec
	for _, s := range c.specs() {
		ps = append(ps, params.Spec{Name: s.name, Rows: s.rows, Cols: s.cols})
	}
	p, err := params.New(ps)
	if err != nil {
		return nil, fmt.Errorf("featnet: %w", err)
	}
	// Inference must not build graphs; Train turns gradients on for itself.
	p.SetRequiresGrad(false)
	return &Net{Config: c, p: p}, nil
}

// Dim is F, the features' dimension.
func (n *Net) Dim() int { return n.Config.FeatureDim }

// NumParams is the number of weights.
func (n *Net) NumParams() int { return n.p.Len() }

// pool2 is a 2×2 average pool with stride 2 over a batch of h×w token-major
// grids (odd trailing rows and columns dropped, as PyTorch's AvgPool2d):
// one GatherRows lines each output cell's four inputs up as consecutive
// rows and MeanRows averages each run of four. Built from two existing ops,
// its gradient is theirs and ops.Backward can walk it (it refuses nodes
// from outside package ops).
func pool2(x mat.Tensor, batch, h, w int) (y mat.Tensor, ho, wo int) {
	ho, wo = h/2, w/2
	m := batch * ho * wo
	idx := make([]int, 0, 4*m)
	off := make([]int, m+1)
	for b := range batch {
		for i := range ho {
			for j := range wo {
				base := b*h*w + 2*i*w + 2*j
				idx = append(idx, base, base+1, base+w, base+w+1)
			}
		}
	}
	for k := range off {
		off[k] = 4 * k
	}
	return ops.MeanRows(ops.GatherRows(x, idx), off), ho, wo
}

// forward runs the network on x [batch·h·w, InChannels] (token-major) and
// returns the features [batch, F] and the logits [batch, classes].
func (n *Net) forward(x mat.Tensor, batch, h, w int) (feat, logits mat.Tensor) {
	c := n.Config
	g := func(name string) mat.Tensor { return n.p.Get(name) }
	block := func(x mat.Tensor, k string, h, w int) mat.Tensor {
		x = ops.Conv3x3(x, g("conv"+k+".weight"), g("conv"+k+".bias"), batch, h, w)
		return ops.GroupNormSiLU(x, g("norm"+k+".weight"), g("norm"+k+".bias"), batch, c.Groups, groupNormEps)
	}
	x = block(x, "0", h, w)
	x, h, w = pool2(x, batch, h, w)
	x = block(x, "1", h, w)
	x = block(x, "2", h, w)
	x, h, w = pool2(x, batch, h, w)
	x = block(x, "3", h, w)
	off := make([]int, batch+1)
	for b := range off {
		off[b] = b * h * w
	}
	feat = ops.Linear(ops.MeanRows(x, off), g("feature.weight"), g("feature.bias"))
	logits = ops.Linear(ops.SiLU(feat), g("head.weight"), g("head.bias"))
	return feat, logits
}

// tokenMajor writes latents [n, c, h, w] as token-major rows [n·h·w, c].
func tokenMajor(dst, src []float32, n, c, h, w int) {
	hw := h * w
	for b := range n {
		s := src[b*c*hw : (b+1)*c*hw]
		d := dst[b*hw*c : (b+1)*hw*c]
		for ch := range c {
			for l := range hw {
				d[l*c+ch] = s[ch*hw+l]
			}
		}
	}
}

// checkInput validates a latent batch for inference.
func (n *Net) checkInput(latents []float32, num, c, h, w int) error {
	switch {
	case n == nil || n.p == nil:
		return errors.New("featnet: nil network")
	case num < 0:
		return fmt.Errorf("featnet: %d samples, want ≥ 0", num)
	case c != n.Config.InChannels:
		return fmt.Errorf("featnet: latents have %d channels, the network takes %d", c, n.Config.InChannels)
	case h < MinSize || w < MinSize:
		return fmt.Errorf("featnet: latents are %d×%d, want at least %d×%d", h, w, MinSize, MinSize)
	case len(latents) != num*c*h*w:
		return fmt.Errorf("featnet: %d latent values, want n·c·h·w = %d·%d·%d·%d = %d", len(latents), num, c, h, w, num*c*h*w)
	}
	for i, v := range latents {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("featnet: latent value %d (sample %d) is %v", i, i/(c*h*w), v)
		}
	}
	return nil
}

// inferBatch bounds the samples per forward pass, and so the memory of the
// activations (about 25 KB per 16×16 sample).
const inferBatch = 256

// run evaluates the network on latents [num, c, h, w] in chunks, calling
// each with the chunk's first sample index and its features and logits.
func (n *Net) run(latents []float32, num, c, h, w int, each func(first int, feat, logits []float32)) error {
	if err := n.checkInput(latents, num, c, h, w); err != nil {
		return err
	}
	if n.p.RequiresGrad() {
		return errors.New("featnet: the network is training")
	}
	per := c * h * w
	buf := make([]float32, min(num, inferBatch)*per)
	for first := 0; first < num; first += inferBatch {
		b := min(inferBatch, num-first)
		x := buf[:b*per]
		tokenMajor(x, latents[first*per:(first+b)*per], b, c, h, w)
		xt := mat.NewDense[float32](mat.WithShape(b*h*w, c), mat.WithBacking(x))
		feat, logits := n.forward(xt, b, h, w)
		each(first, mat.Data[float32](feat.Value()), mat.Data[float32](logits.Value()))
	}
	return nil
}

// Features returns the penultimate features of latents [n, c, h, w]
// (row-major, c = the network's input channels, h, w ≥ MinSize) as n×Dim()
// float64 values, row-major: what Stats and Frechet take.
func (n *Net) Features(latents []float32, num, c, h, w int) ([]float64, error) {
	if n == nil {
		return nil, errors.New("featnet: nil network")
	}
	f := n.Config.FeatureDim
	out := make([]float64, num*f)
	err := n.run(latents, num, c, h, w, func(first int, feat, _ []float32) {
		for i, v := range feat {
			out[first*f+i] = float64(v)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Classify returns the predicted class (arg-max logit, lowest index on a
// tie) of each of latents [n, c, h, w].
func (n *Net) Classify(latents []float32, num, c, h, w int) ([]int, error) {
	if n == nil {
		return nil, errors.New("featnet: nil network")
	}
	k := n.Config.NumClasses
	out := make([]int, num)
	err := n.run(latents, num, c, h, w, func(first int, _, logits []float32) {
		for s := range len(logits) / k {
			out[first+s] = argmax(logits[s*k : (s+1)*k])
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Moments is Features followed by Stats.
func (n *Net) Moments(latents []float32, num, c, h, w int) (Moments, error) {
	f, err := n.Features(latents, num, c, h, w)
	if err != nil {
		return Moments{}, err
	}
	return Stats(f, num, n.Dim())
}

// Accuracy returns the fraction of latents [n, c, h, w] that Classify
// assigns to their label.
func (n *Net) Accuracy(latents []float32, labels []int, num, c, h, w int) (float64, error) {
	if len(labels) != num {
		return 0, fmt.Errorf("featnet: %d labels for %d samples", len(labels), num)
	}
	if num == 0 {
		return 0, errors.New("featnet: accuracy of no samples")
	}
	pred, err := n.Classify(latents, num, c, h, w)
	if err != nil {
		return 0, err
	}
	right := 0
	for i, p := range pred {
		if p == labels[i] {
			right++
		}
	}
	return float64(right) / float64(num), nil
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

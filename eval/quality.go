package eval

import (
	"fmt"
	"maps"
	"math"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval/featnet"
)

// sampleLabels are the classes every row's samples are drawn for: those
// of the teacher's sampleKeys (a DiT's labels 0, 1, 2, … in turn; a
// Z-Image's captions' classes), so each class gets the same share.
func (e *evaluator) sampleLabels() []int {
	return e.tc.classes(e.tc.sampleKeys(e.o.NumSamples))
}

// gridOf keeps the samples the elastic grid shows.
func (e *evaluator) gridOf(samples []float32) []float32 {
	return append([]float32(nil), samples[:e.o.GridSamples*e.n]...)
}

// realStats measures the data with the feature network: the reference
// statistics, the network's accuracy, and the floor — the Fréchet distance
// between the reference and a second, disjoint set of data samples. Both
// sets hold NumSamples data samples with the same labels as the generated
// samples (sampleLabels), the first that qualify in data order: the
// features cluster by class, so a reference with other class counts than
// the samples would add a distance no model could remove.
func (e *evaluator) realStats() error {
	d, net := e.data, e.o.Features
	ref, second, err := e.balancedIndices()
	if err != nil {
		return err
	}
	idx := append(append([]int(nil), ref...), second...)
	x, y, err := d.Batch(nil, nil, idx)
	if err != nil {
		return err
	}
	k := len(idx)
	feats, err := net.Features(x, k, d.C, d.H, d.W)
	if err != nil {
		return fmt.Errorf("eval: feature network on the data: %w", err)
	}
	classes, err := net.Classify(x, k, d.C, d.H, d.W)
	if err != nil {
		return fmt.Errorf("eval: feature network on the data: %w", err)
	}
	correct := 0
	for i, c := range classes {
		if c == y[i] {
			correct++
		}
	}
	dim, n := net.Dim(), len(ref)
	if e.real, err = featnet.Stats(feats[:n*dim], n, dim); err != nil {
		return fmt.Errorf("eval: data features: %w", err)
	}
	e.r.FeatureNet = &FeatureNetStats{Accuracy: float64(correct) / float64(k), Dim: dim, Samples: n, FloorSamples: len(second),
		DataRMS: rms(x[:n*d.C*d.H*d.W])}
	if second == nil {
		return nil
	}
	b, err := featnet.Stats(feats[n*dim:], len(second), dim)
	if err != nil {
		return fmt.Errorf("eval: data features: %w", err)
	}
	floor, err := featnet.Frechet(e.real, b)
	if err != nil {
		return fmt.Errorf("eval: data FD floor: %w", err)
	}
	e.r.DataFDFloor = &floor
	return nil
}

// balancedIndices picks the reference (required) and the floor's second
// set (nil when the data runs out) in data order, each with the class
// counts of sampleLabels.
func (e *evaluator) balancedIndices() (ref, second []int, err error) {
	need := map[int]int{}
	for _, l := range e.sampleLabels() {
		need[l]++
	}
	needRef, needSecond := maps.Clone(need), maps.Clone(need)
	for i, l := range e.data.Labels {
		switch {
		case needRef[l] > 0:
			needRef[l]--
			ref = append(ref, i)
		case needSecond[l] > 0:
			needSecond[l]--
			second = append(second, i)
		}
	}
	for l, n := range needRef {
		if n > 0 {
			return nil, nil, fmt.Errorf("eval: the data set holds %d samples of class %d, the Fréchet distance's reference needs %d (as many as the %d samples per row are drawn for)",
				need[l]-n, l, need[l], e.o.NumSamples)
		}
	}
	if len(second) < e.o.NumSamples {
		second = nil
	}
	return ref, second, nil
}

// score measures samples drawn for sampleLabels against the data:
// Fréchet distance and class accuracy (both null without a feature
// network), and FID of the decoded pictures with Options.Pictures. name
// names the row (setting.name).
func (e *evaluator) score(name string, samples []float32) (Quality, error) {
	q, err := e.scoreFeatures(samples)
	if err != nil || e.o.Pictures == nil {
		return q, err
	}
	fid, is, err := e.o.Pictures.Score(name, samples, e.o.NumSamples, e.cfg.InChannels, e.cfg.GridRows, e.cfg.GridCols)
	if err != nil {
		return Quality{}, fmt.Errorf("pictures: %w", err)
	}
	q.FID, q.IS = &fid, &is
	return q, nil
}

// scoreFeatures is score's feature-network part.
func (e *evaluator) scoreFeatures(samples []float32) (Quality, error) {
	net := e.o.Features
	if net == nil {
		return Quality{}, nil
	}
	n, c, h, w := e.o.NumSamples, e.cfg.InChannels, e.cfg.GridRows, e.cfg.GridCols
	feats, err := net.Features(samples, n, c, h, w)
	if err != nil {
		return Quality{}, fmt.Errorf("feature network: %w", err)
	}
	classes, err := net.Classify(samples, n, c, h, w)
	if err != nil {
		return Quality{}, fmt.Errorf("feature network: %w", err)
	}
	st, err := featnet.Stats(feats, n, net.Dim())
	if err != nil {
		return Quality{}, fmt.Errorf("sample features: %w", err)
	}
	fd, err := featnet.Frechet(st, e.real)
	if err != nil {
		return Quality{}, fmt.Errorf("Fréchet distance: %w", err)
	}
	correct := 0
	want := e.sampleLabels()
	for i, cl := range classes {
		if cl == want[i] {
			correct++
		}
	}
	acc := float64(correct) / float64(n)
	r := rms(samples)
	q := Quality{FD: &fd, ClassAccuracy: &acc, RMS: &r}
	if caps := e.tc.captions(); caps != nil {
		var asked [][]int
		for _, k := range e.tc.sampleKeys(n) {
			asked = append(asked, caps[k])
		}
		pf, err := shapes.PromptFollowing(net, samples, n, h, asked)
		if err != nil {
			return Quality{}, err
		}
		q.PromptFollowing = &pf
	}
	return q, nil
}

// rms is the root mean square of v.
func rms(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s / float64(max(len(v), 1)))
}

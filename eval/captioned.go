package eval

import (
	"fmt"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval/featnet"
)

// CaptionedScore is how well samples drawn for captions show them, the
// measures of a caption-conditioned model on the shapes data (the role
// FID and DPG-Bench play for a text-to-image model).
type CaptionedScore struct {
	// FD is the Fréchet distance between the samples' features and those
	// of the data samples whose captions they were drawn for.
	FD float64 `json:"fd"`
	// ClassAccuracy is the share of samples the feature network puts in
	// their caption's class.
	ClassAccuracy float64 `json:"class_accuracy"`
	// PromptFollowing is the share whose class and foreground colour are
	// their caption's (shapes.PromptFollowing).
	PromptFollowing float64 `json:"prompt_following"`
	// DataFDFloor is the FD between the reference data and the next
	// NumSamples data samples (nil when the data runs out): the floor at
	// this sample count.
	DataFDFloor *float64 `json:"data_fd_floor"`
	NumSamples  int      `json:"num_samples"`
}

// ScoreCaptioned scores n samples [n, C, H, W] drawn for the captions of
// data's first n samples (data must have captions) with the feature
// network net.
func ScoreCaptioned(samples []float32, n int, data *datasets.Set, net FeatureNet) (*CaptionedScore, error) {
	switch {
	case data.Captions == nil:
		return nil, fmt.Errorf("eval: the data set has no captions to score samples against")
	case n < 2 || n > data.N:
		return nil, fmt.Errorf("eval: %d samples for a data set of %d, want 2..%d", n, data.N, data.N)
	case data.H != data.W:
		return nil, fmt.Errorf("eval: %d×%d latents, want square ones (the shapes data)", data.H, data.W)
	}
	per := data.C * data.H * data.W
	if len(samples) != n*per {
		return nil, fmt.Errorf("eval: %d sample values for %d samples of [%d %d %d]", len(samples), n, data.C, data.H, data.W)
	}
	stats := func(x []float32, k int) (featnet.Moments, error) {
		f, err := net.Features(x, k, data.C, data.H, data.W)
		if err != nil {
			return featnet.Moments{}, fmt.Errorf("eval: feature network: %w", err)
		}
		return featnet.Stats(f, k, net.Dim())
	}
	got, err := stats(samples, n)
	if err != nil {
		return nil, err
	}
	ref, err := stats(data.Latents[:n*per], n)
	if err != nil {
		return nil, err
	}
	s := &CaptionedScore{NumSamples: n}
	if s.FD, err = featnet.Frechet(got, ref); err != nil {
		return nil, fmt.Errorf("eval: Fréchet distance: %w", err)
	}
	if 2*n <= data.N {
		second, err := stats(data.Latents[n*per:2*n*per], n)
		if err != nil {
			return nil, err
		}
		floor, err := featnet.Frechet(second, ref)
		if err != nil {
			return nil, fmt.Errorf("eval: data FD floor: %w", err)
		}
		s.DataFDFloor = &floor
	}
	classes, err := net.Classify(samples, n, data.C, data.H, data.W)
	if err != nil {
		return nil, fmt.Errorf("eval: feature network: %w", err)
	}
	hits := 0
	for i, c := range classes {
		if c == data.Labels[i] {
			hits++
		}
	}
	s.ClassAccuracy = float64(hits) / float64(n)
	if s.PromptFollowing, err = shapes.PromptFollowing(net, samples, n, data.H, data.Captions[:n]); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return s, nil
}

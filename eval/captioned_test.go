package eval

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval/featnet"
)

// The data scored against its own captions follows them (class accuracy
// and prompt following near 1, FD 0 against itself); the same samples
// under captions shifted by one follow almost none; bad input is refused.
func TestScoreCaptioned(t *testing.T) {
	net, err := featnet.Load("../testdata/featnet/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	g, err := shapes.New(16, 21)
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.CaptionedSet(120)
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	per := data.C * data.H * data.W
	own, err := ScoreCaptioned(data.Latents[:n*per], n, data, net)
	if err != nil {
		t.Fatal(err)
	}
	if !(own.FD <= 1e-6) || !(own.ClassAccuracy >= 0.95) || !(own.PromptFollowing >= 0.95) || own.DataFDFloor == nil || !(*own.DataFDFloor > 0) {
		t.Errorf("the data against its own captions: %+v", own)
	}
	shifted := *data
	shifted.Captions = append(append([][]int(nil), data.Captions[1:]...), data.Captions[0])
	shifted.Labels = append(append([]int(nil), data.Labels[1:]...), data.Labels[0])
	off, err := ScoreCaptioned(data.Latents[:n*per], n, &shifted, net)
	if err != nil {
		t.Fatal(err)
	}
	if !(off.PromptFollowing <= 0.2) || !(off.ClassAccuracy <= 0.3) {
		t.Errorf("captions shifted by one: %+v, want little following", off)
	}
	plain := *data
	plain.Captions = nil
	for _, c := range []struct {
		samples []float32
		n       int
		data    *datasets.Set
		err     string
	}{
		{data.Latents[:n*per], n, &plain, "no captions"},
		{data.Latents[:per], 1, data, "want 2..120"},
		{data.Latents[:n*per-1], n, data, "sample values"},
	} {
		if _, err := ScoreCaptioned(c.samples, c.n, c.data, net); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v", c.err, err)
		}
	}
}

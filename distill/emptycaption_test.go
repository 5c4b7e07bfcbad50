package distill

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/testckpt"
)

// captionRecorder is an objective that records the captions it is given.
type captionRecorder struct{ seen [][]int }

func (o *captionRecorder) Step(_ int, b *Batch, _ *rand.Rand) (Metrics, error) {
	for _, c := range b.Captions {
		o.seen = append(o.seen, slices.Clone(c))
	}
	return Metrics{Loss: 1}, nil
}

// A caption dropped for guidance (all of them, nearly, at a dropout of
// 0.999 and this seed) becomes the data set's empty caption
// when it has one (the empty prompt's rows of encoded captions), else the
// empty caption.
func TestDroppedCaptionIsTheEmptyCaption(t *testing.T) {
	for _, c := range []struct {
		name  string
		empty []int
	}{{"empty prompt's rows", []int{6, 7}}, {"none", nil}} {
		t.Run(c.name, func(t *testing.T) {
			m := testckpt.RandomZImage(t, 4)
			data := randomData(t, 3, m.Config.InChannels, 4)
			if err := data.WithCaptions([][]int{{0, 1}, {2}, {3, 4, 5}}, 8); err != nil {
				t.Fatal(err)
			}
			data.EmptyCaption = c.empty
			rec := &captionRecorder{}
			tr := &Trainer{Config: Config{Stage: "s", Seed: 1, Steps: 2, BatchSize: 3, LR: 1e-3, LabelDropout: 0.999},
				Params: m.Params, Objective: rec, Data: data, Dir: t.TempDir()}
			if _, err := tr.Run(); err != nil {
				t.Fatal(err)
			}
			if len(rec.seen) != 6 {
				t.Fatalf("%d captions seen, want 6", len(rec.seen))
			}
			for i, got := range rec.seen {
				if !slices.Equal(got, c.empty) {
					t.Errorf("dropped caption %d is %v, want %v", i, got, c.empty)
				}
			}
		})
	}
}

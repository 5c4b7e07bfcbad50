package hnet

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
)

// The main network's count agrees with dit's independent count of the same
// blocks (one sample, no patch embedding or final layer), and the model's
// total falls as tokens are dropped.
func TestFLOPs(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		net := m.Backbone.(*Network)
		nc := net.Config
		dc := &arch.DiTConfig{Depth: nc.Depth, HiddenSize: nc.Width, NumHeads: nc.Heads, PatchSize: 1, InChannels: 1,
			MLPRatio: float64(nc.MLPHidden) / float64(nc.Width), FrequencySize: nc.FrequencySize, LearnSigma: false}
		for _, l := range []int{1, 37, m.Config.Tokens()} {
			f := dit.ForwardFLOPs(dc, l)
			want := f.Blocks + f.Attention + f.Embed - 2*float64(l)*float64(nc.Width) // minus the 1-channel patch embedding
			if got := net.FLOPs([]int{l}); !fixtures.Within(math.Abs(got-want), 1e-9*want) {
				t.Errorf("main network over %d tokens: %g FLOPs, dit counts %g", l, got, want)
			}
		}
		L := m.Config.Tokens()
		full := m.ForwardFLOPs([]int{L, L})
		half := m.ForwardFLOPs([]int{L / 2, L / 4})
		if !(half.Total() < full.Total()) || !(half.Backbone < full.Backbone) || !(half.DeChunk < full.DeChunk) || half.Encoder != full.Encoder {
			t.Errorf("FLOPs at full %+v vs dropped %+v", full, half)
		}
		if full.KeptRatio != 1 || half.KeptRatio != 0.375 {
			t.Errorf("kept ratios %v, %v", full.KeptRatio, half.KeptRatio)
		}
		t.Logf("per forward of 2 samples: full %.4g GFLOP, kept %.3f: %.4g GFLOP", full.Total()/1e9, half.KeptRatio, half.Total()/1e9)
	})
}

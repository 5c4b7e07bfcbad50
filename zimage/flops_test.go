package zimage

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/arch"
)

// The count on the zimage-tiny configuration (written out here, not read
// from the fixture, so that the expected numbers below stay a hand
// computation): dim 32, 2 heads of 16, FFN 85, adaLN 32, timestep MLP
// 256 → 1024 → 32, captions of 32 features, 2×2 patches of 16 channels
// (64 features), 1 refiner layer of each kind, 2 main layers.
//
// Per padded row, a block's linears cost 2·32·96 + 2·32·32 + 2·(2·32·85)
// + 2·85·32 = 6144 + 2048 + 10880 + 5440 = 24512; a modulated block's
// adaLN costs 2·32·128 = 8192 once per item; attention over L rows costs
// 2·L²·(4·16 + 3) = 134·L². The timestep MLP costs 2·256·1024 + 2·1024·32
// = 589824.
func TestForwardFLOPsByHand(t *testing.T) {
	cfg := &arch.ZImageConfig{Dim: 32, NLayers: 2, NRefinerLayers: 1, NHeads: 2, NKVHeads: 2, InChannels: 16,
		PatchSize: 2, FPatchSize: 1, CapFeatDim: 32, FFNHidden: 85, AdaLNDim: 32, TMidDim: 1024, FrequencySize: 256}
	cases := []struct {
		name                string
		tokens, captionLen  int
		embed, refiners     float64
		layers, attn, final float64
	}{
		{
			// 8×8 latent: 16 tokens → 32 rows; caption 7 → 32 rows;
			// unified 64 rows.
			name: "16 tokens, caption 7", tokens: 16, captionLen: 7,
			embed:    2*16*64*32 + 2*7*32*32 + 589824, // 65536 + 14336 + 589824
			refiners: (8192 + 32*24512) + 32*24512,    // noise + context
			layers:   2 * (8192 + 64*24512),           // 3153920
			attn:     134 * (32*32 + 32*32 + 2*64*64), // 1372160
			final:    2*32*32 + 2*16*32*64,            // 2048 + 65536
		},
		{
			// Caption 45 → 64 rows; unified 96 rows.
			name: "16 tokens, caption 45", tokens: 16, captionLen: 45,
			embed:    65536 + 2*45*32*32 + 589824,
			refiners: (8192 + 32*24512) + 64*24512,
			layers:   2 * (8192 + 96*24512),
			attn:     134 * (32*32 + 64*64 + 2*96*96),
			final:    67584,
		},
		{
			// A 6×10 latent: 15 tokens, still 32 rows; a caption of
			// exactly 32 needs no pad.
			name: "15 tokens, caption 32", tokens: 15, captionLen: 32,
			embed:    2*15*64*32 + 2*32*32*32 + 589824,
			refiners: 8192 + 64*24512,
			layers:   2 * (8192 + 64*24512),
			attn:     134 * (2*32*32 + 2*64*64),
			final:    2048 + 2*15*32*64,
		},
		{
			// 16×16 latent: 64 tokens, no pad; caption 1 → 32 rows.
			name: "64 tokens, caption 1", tokens: 64, captionLen: 1,
			embed:    2*64*64*32 + 2*1*32*32 + 589824,
			refiners: (8192 + 64*24512) + 32*24512,
			layers:   2 * (8192 + 96*24512),
			attn:     134 * (64*64 + 32*32 + 2*96*96),
			final:    2048 + 2*64*32*64,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ForwardFLOPs(cfg, c.tokens, c.captionLen)
			want := FLOPs{Embed: c.embed, Refiners: c.refiners, Layers: c.layers, Attention: c.attn, Final: c.final}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if total := c.embed + c.refiners + c.layers + c.attn + c.final; got.Total() != total {
				t.Errorf("total %v, want %v", got.Total(), total)
			}
		})
	}
}

// The block linears' count per row is twice the blocks' weight-matrix
// parameters, which arch.ExpectedZImage lists independently: a check that
// no projection is missed or counted twice, at Turbo's size.
func TestForwardFLOPsMatchParameters(t *testing.T) {
	cfg := &arch.ZImageConfig{Dim: 3840, NLayers: 30, NRefinerLayers: 2, NHeads: 30, NKVHeads: 30, InChannels: 16,
		PatchSize: 2, FPatchSize: 1, CapFeatDim: 2560, QKNorm: true, FFNHidden: 10240, AdaLNDim: 256, TMidDim: 1024, FrequencySize: 256}
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	var matrices float64 // weight matrices of layers.* applied per row
	for i, name := range exp.Names() {
		shape := exp.Shape(i)
		if len(shape) != 2 || !strings.HasPrefix(name, "layers.") || strings.Contains(name, "adaLN") {
			continue
		}
		matrices += float64(shape[0] * shape[1])
	}
	// One more token in the unified sequence (a multiple of 32 more
	// rows) adds rows·2·matrices of linear work.
	a := ForwardFLOPs(cfg, 4096, 128)
	b := ForwardFLOPs(cfg, 4096+32, 128)
	if got, want := b.Layers-a.Layers, 32*2*matrices; got != want {
		t.Errorf("32 more rows add %v FLOPs to the layers, want 2·%v·32 = %v", got, matrices, want)
	}
}

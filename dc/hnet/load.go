package hnet

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/posembed"
)

// LoadOptions complete what a reference checkpoint does not store.
type LoadOptions struct {
	Heads    int         // attention heads of the main network
	Settings dc.Settings // de-chunk σ, ratio-loss target and grouping, norm groups
	// PatchSize is the patch grid whose positions the position table
	// holds (Config.PatchSize; 0: the latent grid). PosEmbedPatch finds
	// it from a stored pos_embed.
	PatchSize int
}

// FromTensors builds a reference DC-DiT (the official create_dit layout:
// x_embedder, t_embedder, y_embedder, pos_embed, hnet.*, final_layer) from
// its state_dict tensors. Every tensor must be used: unexpected names are
// an error, reported with any missing or mis-shaped ones. pos_embed is not
// a parameter: it must equal the 2-D sin-cos table, which Forward
// recomputes at each kept token's position.
func FromTensors(ts map[string]dc.Tensor, opts LoadOptions) (*dc.Model, error) {
	shapes := dc.Shapes(ts)
	cfg, err := dc.InferConfig(shapes, opts.Settings, 0, 0)
	if err != nil {
		return nil, err
	}
	ncfg, err := InferConfig(shapes, opts.Heads)
	if err != nil {
		return nil, err
	}
	ncfg.PatchSize = opts.PatchSize
	net, err := New(ncfg, ts)
	if err != nil {
		return nil, err
	}
	m, err := dc.New(cfg, ts, net)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{"pos_embed": true}
	for k := range dc.ScaffoldShapes(cfg) {
		used[k] = true
	}
	for k := range Shapes(ncfg) {
		used[k] = true
	}
	var extra []string
	for k := range ts {
		if !used[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("hnet: unexpected tensors %s", strings.Join(extra, ", "))
	}
	if pe, ok := ts["pos_embed"]; ok {
		if err := checkPosEmbed(pe, cfg.GridRows, cfg.GridCols, ncfg.Width, ncfg.PatchSize); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Load reads a reference DC-DiT safetensors file (see FromTensors).
func Load(path string, opts LoadOptions) (*dc.Model, error) {
	ts, err := loaders.ReadSafetensors(path)
	if err != nil {
		return nil, err
	}
	m, err := FromTensors(ts, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// maxPosPatch is the largest patch grid PosEmbedPatch tries.
const maxPosPatch = 16

// PosEmbedPatch returns the patch size p whose grid positions a stored
// pos_embed [1, rows·cols, d] holds the sin-cos table at (1 for a native
// DC-DiT; p for blocks upcycled from a DiT/p, see Config.PatchSize), or an
// error when it is no such table.
func PosEmbedPatch(pe dc.Tensor, rows, cols, d int) (int, error) {
	var first error
	for p := 1; p <= maxPosPatch; p++ {
		err := checkPosEmbed(pe, rows, cols, d, p)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return 0, fmt.Errorf("%w (nor on any patch grid up to %d)", first, maxPosPatch)
}

// checkPosEmbed verifies a stored pos_embed [1, rows·cols, D] against the
// sin-cos table the network computes on the patch-p grid.
func checkPosEmbed(pe dc.Tensor, rows, cols, d, p int) error {
	if len(pe.Data) != rows*cols*d {
		return fmt.Errorf("hnet: pos_embed has shape %v, want [1 %d %d]", pe.Shape, rows*cols, d)
	}
	row := make([]float32, d)
	for r := range rows {
		for c := range cols {
			posembed.SinCos2D(row, posembed.GridPos(float64(r), p), posembed.GridPos(float64(c), p))
			got := pe.Data[(r*cols+c)*d : (r*cols+c+1)*d]
			for k := range row {
				if !(math.Abs(float64(got[k]-row[k])) <= 1e-5) { // a NaN is no table
					return fmt.Errorf("hnet: pos_embed at grid (%d, %d) differs from the 2-D sin-cos table (%v vs %v at %d)", r, c, got[k], row[k], k)
				}
			}
		}
	}
	return nil
}

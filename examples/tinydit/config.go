package tinydit

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/family"
)

// Config sizes a TinyDiT backbone. Its JSON encoding is the "config"
// object a DC checkpoint records beside kind "tinydit".
type Config struct {
	Width         int `json:"width"`          // D, the token and conditioning width
	Depth         int `json:"depth"`          // blocks
	Heads         int `json:"heads"`          // attention heads (dividing Width)
	MLPHidden     int `json:"mlp_hidden"`     // each block's MLP hidden width
	FrequencySize int `json:"frequency_size"` // sinusoidal timestep features (even)
	NumClasses    int `json:"num_classes"`    // labels 0 … NumClasses−1; NumClasses is the null class
	// GridSize is the latent grid side the position encoding was trained
	// on: a token at latent row r enters as (r + ½)/GridSize − ½, so that
	// the learned map reads coordinates in [−½, ½) on that grid.
	GridSize int `json:"grid_size"`
	// NormEps is the RMSNorms' ε.
	NormEps float64 `json:"norm_eps"`
}

// maxNormEps bounds NormEps: an ε comparable to the activations' mean
// square turns the norm into a scale.
const maxNormEps = 0.1

// Validate checks the config and bounds every size it states, before any
// of them sizes an allocation (a config read from a file is untrusted).
func (c *Config) Validate() error {
	if c == nil {
		return errors.New("tinydit: no config")
	}
	if err := family.CheckBounds(
		family.Bound{Name: "tinydit width", V: c.Width, Max: family.MaxWidth},
		family.Bound{Name: "tinydit depth", V: c.Depth, Max: family.MaxBlocks},
		family.Bound{Name: "tinydit heads", V: c.Heads, Max: family.MaxWidth},
		family.Bound{Name: "tinydit mlp_hidden", V: c.MLPHidden, Max: family.MaxMLP},
		family.Bound{Name: "tinydit frequency_size", V: c.FrequencySize, Max: family.MaxWidth},
		family.Bound{Name: "tinydit num_classes", V: c.NumClasses, Max: family.MaxClasses},
		family.Bound{Name: "tinydit grid_size", V: c.GridSize, Max: family.MaxGridSide},
	); err != nil {
		return err
	}
	if err := family.CheckPositive(
		family.Bound{Name: "tinydit width", V: c.Width}, family.Bound{Name: "tinydit depth", V: c.Depth},
		family.Bound{Name: "tinydit heads", V: c.Heads}, family.Bound{Name: "tinydit mlp_hidden", V: c.MLPHidden},
		family.Bound{Name: "tinydit frequency_size", V: c.FrequencySize},
		family.Bound{Name: "tinydit num_classes", V: c.NumClasses}, family.Bound{Name: "tinydit grid_size", V: c.GridSize},
	); err != nil {
		return err
	}
	if c.Width%c.Heads != 0 {
		return fmt.Errorf("tinydit width %d with %d heads: want heads dividing the width", c.Width, c.Heads)
	}
	if c.FrequencySize%2 != 0 {
		return fmt.Errorf("tinydit frequency_size = %d, want an even number (cosines and sines)", c.FrequencySize)
	}
	if !(c.NormEps > 0 && c.NormEps <= maxNormEps) {
		return fmt.Errorf("tinydit norm_eps = %v, want 0 < ε ≤ %g", c.NormEps, maxNormEps)
	}
	return nil
}

// Shapes lists the backbone's tensors under prefix + their names, with
// their shapes: the timestep MLP and label table, the position map, the
// blocks and the final RMSNorm.
func (c *Config) Shapes(prefix string) map[string][]int {
	D := c.Width
	s := map[string][]int{
		prefix + "t_embedder.mlp.0.weight":           {D, c.FrequencySize},
		prefix + "t_embedder.mlp.0.bias":             {D},
		prefix + "t_embedder.mlp.2.weight":           {D, D},
		prefix + "t_embedder.mlp.2.bias":             {D},
		prefix + "y_embedder.embedding_table.weight": {c.NumClasses + 1, D},
		prefix + "pos_embed.proj.weight":             {D, 2},
		prefix + "pos_embed.proj.bias":               {D},
		prefix + "norm_out.weight":                   {D},
	}
	for i := range c.Depth {
		b := fmt.Sprintf("%sblocks.%d.", prefix, i)
		s[b+"norm1.weight"] = []int{D}
		s[b+"norm2.weight"] = []int{D}
		s[b+"modulation.weight"] = []int{4 * D, D}
		s[b+"modulation.bias"] = []int{4 * D}
		s[b+"attn.qkv.weight"] = []int{3 * D, D}
		s[b+"attn.qkv.bias"] = []int{3 * D}
		s[b+"attn.proj.weight"] = []int{D, D}
		s[b+"attn.proj.bias"] = []int{D}
		s[b+"mlp.fc1.weight"] = []int{c.MLPHidden, D}
		s[b+"mlp.fc1.bias"] = []int{c.MLPHidden}
		s[b+"mlp.fc2.weight"] = []int{D, c.MLPHidden}
		s[b+"mlp.fc2.bias"] = []int{D}
	}
	return s
}

// FLOPs counts the conditioning, the position map and the blocks over
// packed sequences of the given lengths (one per sample) in dc.FLOPs'
// convention: 2 per multiply-add, H·Σ L_b²·(4·d_h + 3) for attention,
// norms and activations free.
func (c *Config) FLOPs(lengths []int) float64 {
	D, hid := float64(c.Width), float64(c.MLPHidden)
	B := float64(len(lengths))
	var tokens, pairs float64
	for _, l := range lengths {
		tokens += float64(l)
		pairs += float64(l) * float64(l)
	}
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	embed := mac(B, float64(c.FrequencySize), D) + mac(B, D, D) + mac(tokens, 2, D)
	block := mac(B, D, 4*D) + mac(tokens, D, 3*D) + mac(tokens, D, D) + mac(tokens, D, hid) + mac(tokens, hid, D)
	attn := float64(c.Heads) * pairs * (4*D/float64(c.Heads) + 3)
	return embed + float64(c.Depth)*(block+attn)
}

package dc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/params"
)

// Tensor is one named parameter tensor in float32, as read from a file.
type Tensor = loaders.Dense

// Shapes returns the shapes of a tensor map.
func Shapes(ts map[string]Tensor) map[string][]int {
	out := make(map[string][]int, len(ts))
	for k, t := range ts {
		out[k] = t.Shape
	}
	return out
}

// ScaffoldShapes lists every parameter of the scaffold under its reference
// name with its shape: the latent embedder, the encoder and decoder conv
// blocks with their final RMSNorms, the router, residual_proj, the final
// layer and, with WideHead, the wide head.
func ScaffoldShapes(c *Config) map[string][]int {
	s := map[string][]int{
		"x_embedder.proj.weight":                       {c.EncDecDim, c.CellIn(), 3, 3},
		"x_embedder.proj.bias":                         {c.EncDecDim},
		"hnet.encoder.rmsnorm.weight":                  {c.ModelDim},
		"hnet.decoder.rmsnorm.weight":                  {c.EncDecDim},
		"hnet.residual_proj.weight":                    {c.ModelDim, c.ModelDim},
		"hnet.residual_proj.bias":                      {c.ModelDim},
		"hnet.routing_module.proj.weight":              {c.RouterDim, c.ModelDim, 1, 1},
		"hnet.routing_module.proj.bias":                {c.RouterDim},
		"hnet.routing_module.context_predictor.weight": {c.RouterDim, c.RouterDim, 3, 3},
		"hnet.routing_module.context_predictor.bias":   {c.RouterDim},
		"hnet.routing_module.residual_scorer.0.weight": {c.RouterDim, c.RouterDim, 3, 3},
		"hnet.routing_module.residual_scorer.0.bias":   {c.RouterDim},
		"hnet.routing_module.residual_scorer.1.weight": {c.RouterDim},
		"hnet.routing_module.residual_scorer.1.bias":   {c.RouterDim},
		"hnet.routing_module.residual_scorer.3.weight": {1, c.RouterDim, 1, 1},
		"hnet.routing_module.residual_scorer.3.bias":   {1},
		"final_layer.adaLN_modulation.1.weight":        {2 * c.EncDecDim, c.CondDim},
		"final_layer.adaLN_modulation.1.bias":          {2 * c.EncDecDim},
		"final_layer.linear.weight":                    {c.CellOut(), c.EncDecDim},
		"final_layer.linear.bias":                      {c.CellOut()},
	}
	if c.LatentSkip {
		s["latent_skip.weight"] = []int{c.CellOut(), c.CellIn()}
		s["latent_skip.scale.weight"] = []int{c.CellOut(), c.CondDim}
		s["latent_skip.scale.bias"] = []int{c.CellOut()}
	}
	if c.RelativeResidual {
		delete(s, "hnet.residual_proj.bias")
	}
	if c.DroppedContext {
		s["dropped_context.proj.weight"] = []int{c.EncDecDim, c.ModelDim}
		s["dropped_context.conv.weight"] = []int{c.ModelDim, c.EncDecDim, 3, 3}
	}
	if c.ChosenEmbedding {
		s["hnet.decoder.chosen_embedding"] = []int{c.CondDim}
	}
	if c.TokenEmbedder {
		s["token_embedder.weight"] = []int{c.ModelDim, c.CellIn()}
		s["token_embedder.bias"] = []int{c.ModelDim}
	}
	if c.CondNorm {
		s["cond_norm.weight"] = []int{c.CondDim}
		s["cond_norm.bias"] = []int{c.CondDim}
	}
	if c.NoEncoderNorm {
		delete(s, "hnet.encoder.rmsnorm.weight")
	}
	if c.WideHead {
		s["wide_head.adaLN_modulation.1.weight"] = []int{2 * c.ModelDim, c.CondDim}
		s["wide_head.adaLN_modulation.1.bias"] = []int{2 * c.ModelDim}
		s["wide_head.linear.weight"] = []int{c.CellOut(), c.ModelDim}
		s["wide_head.linear.bias"] = []int{c.CellOut()}
	}
	for i, w := range c.ConvWidths() {
		prefix := fmt.Sprintf("hnet.encoder.layers.%d.", i)
		if i >= c.EncoderBlocks {
			prefix = fmt.Sprintf("hnet.decoder.layers.%d.", i-c.EncoderBlocks)
		}
		for k, v := range convBlockShapes(w[0], w[1], c.CondDim) {
			s[prefix+k] = v
		}
	}
	return s
}

// convBlockShapes lists one HNetConvBlock's parameters (names relative to
// the block).
func convBlockShapes(in, out, cond int) map[string][]int {
	inner := min(in, out)
	s := map[string][]int{
		"norm1.weight": {in}, "norm1.bias": {in},
		"conv1.weight": {inner, in, 3, 3}, "conv1.bias": {inner},
		"cond_proj.1.weight": {inner, cond}, "cond_proj.1.bias": {inner},
		"norm2.weight": {inner}, "norm2.bias": {inner},
		"conv2.weight": {out, inner, 3, 3}, "conv2.bias": {out},
	}
	if in != out {
		s["skip_proj.weight"] = []int{out, in, 1, 1}
		s["skip_proj.bias"] = []int{out}
	}
	return s
}

// NewParams allocates a parameter arena for the expected names (sorted)
// and copies their data from ts. Missing and mis-shaped tensors are
// reported together; tensors of ts that are not expected are ignored (the
// caller accounts for them).
func NewParams(ts map[string]Tensor, expected map[string][]int, what string) (*params.Set, error) {
	var problems []string
	names := slices.Sorted(maps.Keys(expected))
	specs := make([]params.Spec, 0, len(names))
	for _, name := range names {
		want := expected[name]
		t, ok := ts[name]
		if !ok {
			problems = append(problems, "missing "+name)
			continue
		}
		if !slices.Equal(t.Shape, want) {
			problems = append(problems, fmt.Sprintf("%s has shape %v, want %v", name, t.Shape, want))
			continue
		}
		rows, cols := matrixShape(want)
		specs = append(specs, params.Spec{Name: name, Rows: rows, Cols: cols})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("dc: %s weights: %s", what, strings.Join(problems, "; "))
	}
	set, err := params.New(specs)
	if err != nil {
		return nil, fmt.Errorf("dc: %s weights: %w", what, err)
	}
	for _, p := range set.List() {
		copy(p.Values(), ts[p.Name].Data)
	}
	return set, nil
}

// matrixShape views a tensor as a matrix: vectors as [n, 1], higher ranks
// flattened after the first dimension (a conv weight [out, in, k, k]
// becomes [out, in·k·k], the layout the conv ops take).
func matrixShape(shape []int) (rows, cols int) {
	if len(shape) == 1 {
		return shape[0], 1
	}
	cols = 1
	for _, d := range shape[1:] {
		cols *= d
	}
	return shape[0], cols
}

package official

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/pytorch"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// The fixed parts of the official model (models.py, config.py).
const (
	inChannels    = 4   // train.py and sample.py build the model with 4
	frequencySize = 256 // TimestepEmbedder's sinusoid width
	normGroups    = 32  // HNetConvBlock's GroupNorm
	routerGroups  = 8   // the router scorer's GroupNorm
	routerDivisor = 4   // the router's bottleneck is its input width / 4
	latentScale   = 8   // image_size / latent side (the SD VAE)
)

// ConfigOf says how the official code would have to be configured to
// build model, or why it cannot: every setting of dcdit's that the
// official DC-DiT lacks is named. Settings that change the official
// model's forward pass but not its tensors (the GroupNorm group counts)
// are refused too unless force, and then returned as warnings: the files
// load, the model computes something else.
func ConfigOf(meta *checkpoint.Meta, force bool) (_ *Config, warnings []string, _ error) {
	s := &meta.Scaffold
	var why []string
	no := func(cond bool, format string, args ...any) {
		if cond {
			why = append(why, fmt.Sprintf(format, args...))
		}
	}
	forward := func(cond bool, format string, args ...any) {
		if cond {
			warnings = append(warnings, fmt.Sprintf(format, args...))
		}
	}
	hs, _ := meta.Backbone.Spec.(hnet.Spec)
	h := hs.Config
	if meta.Backbone.Kind != hnet.Kind || h == nil {
		return nil, nil, fmt.Errorf("official: the backbone is %q, the official DC-DiT's is its own main network (%q): a %s backbone has no official layout", meta.Backbone.Kind, hnet.Kind, meta.Backbone.Kind)
	}
	no(s.Patch() != 1, "scaffold patch_size %d (the official scaffold works on every latent position: 1)", s.Patch())
	no(s.WideHead, "a wide head (dcdit's; the official has only the E-wide final layer)")
	no(s.NoEncoderNorm, "no encoder RMSNorm (the official encoder ends in one)")
	no(s.RelativeResidual, "the relative residual (the official residual_proj reads the encoding itself, with a bias)")
	no(s.LatentSkip, "the latent skip path")
	no(s.CondNorm, "the conditioning adaptor")
	no(s.TokenEmbedder, "a token embedder (the official main network reads the encoder's output)")
	no(s.ChosenEmbedding, "the chosen-cells embedding (the official decoder reads the conditioning alone)")
	no(s.DroppedContext, "the dropped context (the official tokens are the encoder's output alone)")
	no(s.InChannels != inChannels, "%d input channels (the official code builds %d)", s.InChannels, inChannels)
	no(s.OutChannels != inChannels && s.OutChannels != 2*inChannels, "%d output channels (official: %d, or %d with learned σ)", s.OutChannels, inChannels, 2*inChannels)
	no(s.GridRows != s.GridCols, "a %d×%d grid (the official model is square)", s.GridRows, s.GridCols)
	forward(s.NormGroups != normGroups, "norm_groups %d (official: %d)", s.NormGroups, normGroups)
	forward(s.RouterGroups != routerGroups, "router_groups %d (official: %d)", s.RouterGroups, routerGroups)
	no(s.RouterDim*routerDivisor != s.ModelDim, "a router bottleneck of %d (official: model width / %d = %d)", s.RouterDim, routerDivisor, s.ModelDim/routerDivisor)
	no(s.CondDim != s.ModelDim, "conditioning width %d ≠ model width %d", s.CondDim, s.ModelDim)
	no(s.EncDecDim < 1 || s.ModelDim%s.EncDecDim != 0, "an encoder width %d that does not divide the model width %d", s.EncDecDim, s.ModelDim)
	no(h.FrequencySize != frequencySize, "a %d-wide timestep sinusoid (official: %d)", h.FrequencySize, frequencySize)
	no(h.MLPHidden < 1, "blocks without an MLP")
	no(h.WidthGates, "DyDiT's width gates (the official blocks have no routers)")
	if len(why) > 0 {
		return nil, nil, fmt.Errorf("official: the official DC-DiT cannot hold this model: %s", strings.Join(append(why, warnings...), "; "))
	}
	if len(warnings) > 0 && !force {
		return nil, nil, fmt.Errorf("official: the official DC-DiT would compute another model from these tensors: %s (--force writes the files anyway)", strings.Join(warnings, "; "))
	}
	c := Defaults()
	c.EncoderBlocks, c.Depth, c.DecoderBlocks = s.EncoderBlocks, h.Depth, s.DecoderBlocks
	c.DModel, c.NumHeads, c.EncDecDimFactor = s.ModelDim, h.Heads, s.ModelDim/s.EncDecDim
	c.DechunkSigma = s.Sigma
	c.MLPRatio = float64(h.MLPHidden) / float64(h.Width)
	if int(float64(h.Width)*c.MLPRatio) != h.MLPHidden {
		return nil, nil, fmt.Errorf("official: an MLP of %d at width %d: no mlp_ratio gives int(width·ratio) = %d", h.MLPHidden, h.Width, h.MLPHidden)
	}
	c.LearnSigma = s.OutChannels == 2*inChannels
	c.RatioLossWeight, c.RatioBatchSize, c.DownsampleFactor = s.RatioLossWeight, s.RatioBatchSize, s.TargetN
	if len(meta.TrainedRhos) > 0 {
		c.MultiBudgetDropFractions = slices.Clone(meta.TrainedRhos)
		c.MultiBudgetTraining = len(meta.TrainedRhos) > 1
	}
	c.ImageSize, c.NumClasses = latentScale*s.GridRows, h.NumClasses
	// dcdit's class table always holds the null class: the official one
	// does when class dropout is on, which its default 0.1 keeps.
	return c, warnings, nil
}

// StateDict returns the official state dict of a DC model, F32, in the
// checkpoint's tensor order, pos_embed first as create_dit registers it:
// the 2-D sin-cos table the official model holds as a parameter,
// [1, L, D], at the positions dcdit embeds each latent cell at (for
// blocks upcycled from a DiT/p, the cell's place on the patch grid), so
// that the official forward adds what dcdit's does.
func StateDict(model *dc.Model, meta *checkpoint.Meta) ([]pytorch.SaveTensor, error) {
	if _, _, err := ConfigOf(meta, true); err != nil {
		return nil, err
	}
	s := &meta.Scaffold
	p := meta.Backbone.Spec.(hnet.Spec).Config.PatchSize
	pos := make([]float32, s.Tokens()*s.ModelDim)
	for r := range s.GridRows {
		for c := range s.GridCols {
			i := (r*s.GridCols + c) * s.ModelDim
			posembed.SinCos2D(pos[i:i+s.ModelDim], posembed.GridPos(float64(r), p), posembed.GridPos(float64(c), p))
		}
	}
	out := []pytorch.SaveTensor{{Name: "pos_embed", DType: dtype.F32, Shape: []int64{1, int64(s.Tokens()), int64(s.ModelDim)}, Data: dtype.F32Bytes(pos)}}
	shapes := meta.Shapes()
	sets := []*params.Set{model.Params}
	if bb := model.Backbone.Parameters(); bb != nil {
		sets = append(sets, bb)
	}
	for _, set := range sets {
		for _, p := range set.List() {
			shape, ok := shapes[p.Name]
			if !ok {
				return nil, fmt.Errorf("official: parameter %q is not part of a DC-DiT state dict", p.Name)
			}
			sh := make([]int64, len(shape))
			for i, d := range shape {
				sh[i] = int64(d)
			}
			out = append(out, pytorch.SaveTensor{Name: p.Name, DType: dtype.F32, Shape: sh, Data: dtype.F32Bytes(p.Values())})
		}
	}
	return out, nil
}

// Import builds a DC model from an official state dict (names as
// create_dit's, pos_embed included or not) and the config it was trained
// with, checking one against the other: the widths, block counts, grid,
// classes and output channels the config states must be the tensors'.
func Import(ts map[string]dc.Tensor, c *Config) (*dc.Model, error) {
	if !(c.ClassDropoutProb > 0) {
		// Its last row would be taken for the null class.
		return nil, fmt.Errorf("official: training.class_dropout_prob is %g: that model has no null-class row, which dcdit's class conditioning always has", c.ClassDropoutProb)
	}
	// The table says which grid its positions are on: the latent grid, or
	// a DiT/p's patch grid for blocks dcdit upcycled and exported.
	patch := 1
	if pe, ok := ts["pos_embed"]; ok {
		if n := c.Grid() * c.Grid(); len(pe.Shape) == 3 && pe.Shape[1] != n {
			side := int(math.Round(math.Sqrt(float64(pe.Shape[1]))))
			return nil, fmt.Errorf("official: the config does not describe these tensors: latent grid side (image_size / 8): config %d, tensors %d (pos_embed %v)", c.Grid(), side, pe.Shape)
		}
		var err error
		if patch, err = hnet.PosEmbedPatch(pe, c.Grid(), c.Grid(), c.DModel); err != nil {
			return nil, fmt.Errorf("official: %w", err)
		}
	}
	m, err := hnet.FromTensors(ts, hnet.LoadOptions{Heads: c.NumHeads, PatchSize: patch, Settings: c.settings()})
	if err != nil {
		return nil, fmt.Errorf("official: %w", err)
	}
	s := m.Config
	var h *hnet.Config
	if n, ok := m.Backbone.(*hnet.Network); ok {
		h = n.Config
	}
	if h == nil {
		return nil, errors.New("official: the state dict did not build DC-DiT's own main network")
	}
	classes := c.NumClasses + 1 // the null class's row
	outs := inChannels
	if c.LearnSigma {
		outs *= 2
	}
	var diff []string
	check := func(what string, config, tensors int) {
		if config != tensors {
			diff = append(diff, fmt.Sprintf("%s: config %d, tensors %d", what, config, tensors))
		}
	}
	check("d_model", c.DModel, s.ModelDim)
	check("d_model / enc_dec_dim_factor", c.DModel/max(c.EncDecDimFactor, 1), s.EncDecDim)
	check("encoder conv blocks (arch_layout)", c.EncoderBlocks, s.EncoderBlocks)
	check("decoder conv blocks (arch_layout)", c.DecoderBlocks, s.DecoderBlocks)
	check("main network blocks (arch_layout)", c.Depth, h.Depth)
	check("MLP width int(d_model·mlp_ratio)", int(float64(c.DModel)*c.MLPRatio), h.MLPHidden)
	check("latent grid side (image_size / 8)", c.Grid(), s.GridRows)
	check("class-table rows (num_classes + the null class)", classes, h.NumClasses+1)
	check("output channels (learn_sigma)", outs, s.OutChannels)
	if len(diff) > 0 {
		return nil, fmt.Errorf("official: the config does not describe these tensors: %s", strings.Join(diff, "; "))
	}
	return m, nil
}

// TrainedRhos are the tail-drop fractions a config trained at: its
// multi-budget set, or ρ = 0 alone.
func (c *Config) TrainedRhos() []float64 {
	if c.MultiBudgetTraining && len(c.MultiBudgetDropFractions) > 0 {
		r := slices.Clone(c.MultiBudgetDropFractions)
		slices.Sort(r)
		return r
	}
	return []float64{0}
}

// ConfigPath is where Export writes the config of a state dict written to
// path: beside it, named after it (model.pt → model.yaml).
func ConfigPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".yaml"
}

// ExportFile writes the DC checkpoint in as the official code's files: a
// bare state dict at out (what sample.py's --ckpt loads with strict=True)
// and its config at ConfigPath(out) (--config). Both are written
// atomically; an existing file is refused, as is a model the official
// DC-DiT cannot hold (ConfigOf says why; force writes one whose only
// differences change the forward pass, and returns them as warnings).
// unheld lists what the checkpoint records beside the model that the files
// leave out (Unheld).
func ExportFile(in, out string, force bool) (warnings, unheld []string, _ error) {
	model, meta, err := checkpoint.Load(in)
	if err != nil {
		return nil, nil, err
	}
	c, warnings, err := ConfigOf(meta, force)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", in, err)
	}
	sd, err := StateDict(model, meta)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", in, err)
	}
	cfgPath := ConfigPath(out)
	if cfgPath == out {
		return nil, nil, fmt.Errorf("official: %s: the state dict needs a file extension (.pt) so that its config can sit beside it as .yaml", out)
	}
	for _, p := range []string{out, cfgPath} {
		if _, err := os.Stat(p); err == nil {
			return nil, nil, fmt.Errorf("official: %s exists; conversions never write over a file", p)
		}
	}
	if err := pytorch.Save(out, sd, pytorch.SaveOptions{}); err != nil {
		return nil, nil, err
	}
	return warnings, Unheld(meta), atomicfile.Write(cfgPath, func(w io.Writer) error {
		_, err := w.Write(c.YAML())
		return err
	})
}

// Unheld lists what a DC checkpoint records beside the model that the
// official files cannot hold, and an export leaves out: the sampling
// settings (checkpoint.Sampling), for the official config has none (its
// sample.py takes guidance and steps as flags, and has no dense steps),
// and the spread drop (dc.Config.SpreadDrop), a rule the official code
// does not have.
func Unheld(meta *checkpoint.Meta) []string {
	var out []string
	if meta.Scaffold.SpreadDrop {
		out = append(out, "the spread drop (scaffold.router.drop): the official tail drop removes the lowest-probability boundaries wherever they lie; sample with dcdit's --drop spread for the rule the model was trained with")
	}
	if s := meta.Sampling; s != nil {
		out = append(out, fmt.Sprintf("the sampling settings (%s): the official config holds none; pass the guidance scale and steps to its sample.py, which has no dense_below", s))
	}
	return out
}

// ImportFile reads an official checkpoint (a bare state dict, or
// train.py's training checkpoint, whose EMA is taken) and writes it as a
// DC checkpoint at out. The config comes from cfgPath, or, when that is
// "", from the training checkpoint's pickled config, or, for a file
// without one, from the tensors and heads (ConfigFromTensors).
func ImportFile(in, cfgPath, out string, heads int) error {
	ck, err := loaders.Open(in)
	if err != nil {
		return err
	}
	defer ck.Close()
	ts, err := readTensors(ck)
	if err != nil {
		return err
	}
	var c *Config
	if cfgPath != "" {
		c, err = ReadConfig(cfgPath)
	} else {
		c, err = pickledConfig(ck)
	}
	switch {
	case err != nil:
		return err
	case c == nil && heads > 0:
		if c, err = ConfigFromTensors(ts, heads); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
	case c == nil:
		return fmt.Errorf("official: %s holds no config: give the YAML it was trained with (--official-config), or its head count (--num-heads) to take the rest from the tensors and config.py's defaults", in)
	}
	m, err := Import(ts, c)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return checkpoint.Save(out, m, checkpoint.Info{TrainedRhos: c.TrainedRhos()})
}

// ConfigFromTensors is the config of an official state dict that came
// without one: every shape from the tensors (widths, block counts, grid,
// classes, learned σ), the head count given, and config.py's defaults for
// what no tensor records (de-chunk σ, target N, the ratio loss's settings,
// the trained fractions).
func ConfigFromTensors(ts map[string]dc.Tensor, heads int) (*Config, error) {
	d := Defaults()
	shapes := dc.Shapes(ts)
	sc, err := dc.InferConfig(shapes, d.settings(), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("official: %w", err)
	}
	nc, err := hnet.InferConfig(shapes, heads)
	if err != nil {
		return nil, fmt.Errorf("official: %w", err)
	}
	c, _, err := ConfigOf(&checkpoint.Meta{Scaffold: *sc, Backbone: checkpoint.Backbone{Kind: hnet.Kind, Spec: hnet.Spec{Config: nc}}}, true)
	if err != nil {
		return nil, err
	}
	c.MultiBudgetTraining, c.MultiBudgetDropFractions = d.MultiBudgetTraining, d.MultiBudgetDropFractions
	return c, nil
}

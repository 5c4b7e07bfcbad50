package official

import (
	"fmt"
	"os"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/loaders"
)

// Options complete what an official checkpoint without its config does
// not store. A file that comes with its config (Open, ReadHeader: a
// training checkpoint's pickled one, or the YAML beside the file) takes
// everything from it.
type Options struct {
	// Heads is the main network's head count (0: not given).
	Heads int
	// GuessHeads, when the head count is neither stored nor given, takes
	// the one of the DC-DiT preset (dc.Presets) of the same width and
	// depth, else 64-wide heads with a warning: enough to price a model,
	// not to run it (ReadHeader only).
	GuessHeads bool
	// Sigma is the de-chunk σ (0: config.py's default, with a warning).
	Sigma float64
	// GridSide is the latent side of a file that holds no pos_embed, the
	// one tensor that tells the grid (0: none given).
	GridSide int
}

// Header is what an official checkpoint's headers say of its model.
type Header struct {
	// Meta describes the model as a DC checkpoint would: the sizes from
	// the tensors, the settings and trained ρ from the file's config, or
	// config.py's defaults where it has none (then Meta.Warnings says
	// which were assumed). Its head count is 0 when HeadsUnknown.
	Meta *checkpoint.Meta
	// Expected lists every tensor the model needs, pos_embed included.
	Expected map[string][]int
	// Report is the model's description for reports: its scaffold's and
	// main network's sizes, leaving out what the file does not state.
	Report map[string]any
	// Preset names the DC-DiT preset the head count was taken from
	// (Options.GuessHeads), or "".
	Preset string
	// HeadsUnknown says that the head count is neither stored nor given.
	HeadsUnknown bool
}

// ReadHeader describes the official checkpoint ck from its headers alone
// (no tensor data is read): to price or report a model too large to load.
func ReadHeader(ck *loaders.Checkpoint, opts Options) (*Header, error) {
	shapes := ck.Shapes()
	c, from, err := storedConfig(ck)
	if err != nil {
		return nil, err
	}
	settings := Defaults().settings()
	heads, side := opts.Heads, opts.GridSide
	if c != nil {
		if err := c.checkHeads(opts.Heads, from); err != nil {
			return nil, err
		}
		heads, side = c.NumHeads, c.Grid()
		settings = c.settings()
	}
	if _, ok := shapes["pos_embed"]; ok {
		side = 0 // the table's length says
	}
	sc, err := dc.InferConfig(shapes, settings, side, side)
	if err != nil {
		return nil, fmt.Errorf("cannot infer the DC-DiT config: %w", err)
	}
	h := &Header{}
	var warnings []string
	if heads == 0 && opts.GuessHeads {
		var warn string
		heads, h.Preset, warn = guessHeads(shapes, sc.ModelDim)
		if warn != "" {
			warnings = append(warnings, warn)
		}
	}
	if c == nil {
		// The ratio-loss target prices a DC model: the router keeps 1/N.
		warnings = append(warnings, fmt.Sprintf("an official DC-DiT state dict stores no target N; assuming N = %g", settings.TargetN))
	}
	// The sizes do not depend on the head count: an unknown one is sized
	// as 1 and reported as 0.
	nc, err := hnet.InferConfig(shapes, max(heads, 1))
	if err != nil {
		return nil, fmt.Errorf("cannot infer the main network's config: %w", err)
	}
	nc.Heads, nc.PatchSize = heads, 1
	h.HeadsUnknown = heads == 0
	h.Meta = &checkpoint.Meta{FormatVersion: checkpoint.FormatVersion, Scaffold: *sc,
		Backbone: checkpoint.Backbone{Kind: hnet.Kind, Spec: hnet.Spec{Config: nc}}, Warnings: warnings}
	if c != nil {
		h.Meta.TrainedRhos = c.TrainedRhos()
	}
	h.Expected = h.Meta.Shapes()
	h.Expected["pos_embed"] = []int{1, sc.Tokens(), sc.ModelDim}
	h.Report = report(sc, nc)
	return h, nil
}

// guessHeads is the head count of the DC-DiT preset of width D and the
// depth the shapes give, and its name, else that of 64-wide heads with a
// warning saying so.
func guessHeads(shapes map[string][]int, D int) (heads int, preset, warning string) {
	depth := 0
	if n, err := hnet.InferConfig(shapes, 1); err == nil {
		depth = n.Depth
	}
	for _, p := range dc.Presets {
		if p.Width == D && p.Depth == depth {
			return p.Heads, p.Name, ""
		}
	}
	heads = max(1, D/64)
	return heads, "", fmt.Sprintf("the head count is not stored and width %d / depth %d match no DC-DiT preset; assuming 64-wide heads (%d) — pass --num-heads to override", D, depth, heads)
}

// report is the description of a model a file states the sizes of:
// settings it may not store are left out, and the head count when
// unknown (0).
func report(s *dc.Config, n *hnet.Config) map[string]any {
	sc := map[string]any{
		"in_channels": s.InChannels, "out_channels": s.OutChannels, "grid_rows": s.GridRows, "grid_cols": s.GridCols,
		"enc_dec_dim": s.EncDecDim, "model_dim": s.ModelDim, "cond_dim": s.CondDim, "router_dim": s.RouterDim,
		"encoder_blocks": s.EncoderBlocks, "decoder_blocks": s.DecoderBlocks,
	}
	bb := map[string]any{"width": n.Width, "depth": n.Depth, "mlp_hidden": n.MLPHidden, "frequency_size": n.FrequencySize,
		"num_classes": n.NumClasses, "patch_size": n.PatchSize}
	if n.Heads > 0 {
		bb["heads"] = n.Heads
	}
	return map[string]any{"scaffold": sc, "backbone": map[string]any{"kind": hnet.Kind, "config": bb}}
}

// Open loads an official checkpoint (any file loaders reads: a bare state
// dict, train.py's training checkpoint, whose EMA is taken) as a DC model
// with the metadata a DC checkpoint would record. The config is the
// file's own (storedConfig), checked against the tensors; without one the
// sizes come from the tensors (ConfigFromTensors), the head count from
// opts (required) and the de-chunk σ from opts, else config.py's default
// with a warning (Meta.Warnings); no trained ρ is then known.
func Open(path string, opts Options) (*dc.Model, *checkpoint.Meta, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer ck.Close()
	c, from, err := storedConfig(ck)
	if err != nil {
		return nil, nil, err
	}
	if c == nil && opts.Heads < 1 {
		return nil, nil, fmt.Errorf("official: %s is an official DC-DiT state dict without its config: it stores no head count; pass --num-heads, or put the YAML config it was trained with beside it as %s", path, ConfigPath(path))
	}
	ts, err := readTensors(ck)
	if err != nil {
		return nil, nil, err
	}
	var info checkpoint.Info
	var warnings []string
	if c != nil {
		if err := c.checkHeads(opts.Heads, from); err != nil {
			return nil, nil, err
		}
		info.TrainedRhos = c.TrainedRhos()
	} else {
		if c, err = ConfigFromTensors(ts, opts.Heads); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if opts.Sigma > 0 {
			c.DechunkSigma = opts.Sigma
		} else {
			warnings = append(warnings, fmt.Sprintf("an official DC-DiT state dict stores no de-chunk σ; assuming config.py's %g", c.DechunkSigma))
		}
	}
	m, err := Import(ts, c)
	if err != nil {
		if from != "" {
			return nil, nil, fmt.Errorf("%s (config: %s): %w", path, from, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	meta, err := checkpoint.MetaOf(m, info)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	meta.Warnings = warnings
	return m, meta, nil
}

// storedConfig is the config an official checkpoint comes with, and where
// it was found: a training checkpoint's pickled config, else the YAML
// beside its file (ConfigPath, as ExportFile writes the pair), else none
// (nil, "").
func storedConfig(ck *loaders.Checkpoint) (*Config, string, error) {
	if c, err := pickledConfig(ck); c != nil || err != nil {
		return c, "the pickled config", err
	}
	if len(ck.Files) != 1 {
		return nil, "", nil
	}
	file := ck.Files[0].Path
	p := ConfigPath(file)
	if st, err := os.Stat(p); p == file || err != nil || !st.Mode().IsRegular() {
		return nil, "", nil
	}
	c, err := ReadConfig(p)
	return c, p, err
}

// pickledConfig is a training checkpoint's pickled config, or nil.
func pickledConfig(ck *loaders.Checkpoint) (*Config, error) {
	if ck.Training == nil || ck.Training.Config == nil {
		return nil, nil
	}
	c, err := FromMap(ck.Training.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: the pickled config: %w", ck.Path, err)
	}
	return c, nil
}

// checkHeads refuses a head count given beside a config (from) that
// states another.
func (c *Config) checkHeads(heads int, from string) error {
	if heads > 0 && heads != c.NumHeads {
		return fmt.Errorf("official: %s states %d heads (model.hnet.num_heads), but %d were given", from, c.NumHeads, heads)
	}
	return nil
}

// settings are the scaffold settings the config trained with.
func (c *Config) settings() dc.Settings {
	return dc.Settings{Sigma: c.DechunkSigma, TargetN: c.DownsampleFactor, RatioLossWeight: c.RatioLossWeight,
		RatioBatchSize: c.RatioBatchSize, NormGroups: normGroups, RouterGroups: routerGroups}
}

// readTensors decodes every tensor of the checkpoint to float32; the
// values may alias the open file, so ck stays open while they are used.
func readTensors(ck *loaders.Checkpoint) (map[string]dc.Tensor, error) {
	shapes := ck.Shapes()
	ts := make(map[string]dc.Tensor, len(ck.Tensors))
	for _, t := range ck.Tensors {
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", ck.Path, t.Name, err)
		}
		ts[t.Name] = dc.Tensor{Shape: shapes[t.Name], Data: v}
	}
	return ts, nil
}

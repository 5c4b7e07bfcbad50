// Package official converts DC models between dcdit's DC checkpoints and
// the files of the official DC-DiT (AMD-AGI/DynamicChunkingDiT): the
// PyTorch state dict its create_dit model loads with strict=True (a bare
// state dict, or train.py's {"model", "ema", "opt", "config"}, whose EMA is
// preferred as its own find_model does), and the YAML config its scripts
// build that model from.
//
// The official model is narrower than dcdit's: one stage
// (["c<n>", ["D<depth>"], "c<n>"]), patch size 1, four input channels, a
// square grid, GroupNorm groups 32 and 8, the router's bottleneck D/4, the
// conditioning at the model width, a 256-wide timestep sinusoid. Export
// refuses a model outside it (dcdit's patch-grid scaffold, wide head,
// relative residual, latent skip, encoder without RMSNorm), naming what
// differs; import checks the config against the tensors.
package official

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config holds the settings of the official YAML config (config.py's
// Config) that shape the model or its forward pass, and the training
// settings a DC checkpoint records. Other keys are ignored on reading, as
// the official code ignores unknown keys.
type Config struct {
	Name string // model.name

	// model.hnet.arch_layout ["c<EncoderBlocks>", ["D<Depth>"], "c<DecoderBlocks>"].
	EncoderBlocks, Depth, DecoderBlocks int
	DModel                              int     // model.hnet.d_model (both entries)
	NumHeads                            int     // model.hnet.num_heads (both entries)
	EncDecDimFactor                     int     // model.hnet.enc_dec_dim_factor[0]; E = D / factor
	DechunkSigma                        float64 // model.hnet.dechunk_kernel_sigma
	FP32RouterDechunk                   bool    // model.hnet.fp32_router_dechunk
	MLPRatio                            float64 // model.mlp_ratio

	ClassDropoutProb         float64   // training.class_dropout_prob (> 0: a null-class row)
	LearnSigma               bool      // training.learn_sigma (8 output channels, else 4)
	RatioLossWeight          float64   // training.ratio_loss_weight
	RatioBatchSize           int       // training.ratio_batch_size
	DownsampleFactor         float64   // training.downsample_factor (target N)
	MultiBudgetTraining      bool      // training.multi_budget_training
	MultiBudgetDropFractions []float64 // training.multi_budget_drop_fractions

	ImageSize  int // data.image_size (the latent grid is image_size/8)
	NumClasses int // data.num_classes

	NoiseSchedule  string // diffusion.noise_schedule
	DiffusionSteps int    // diffusion.diffusion_steps
}

// Defaults returns config.py's defaults.
func Defaults() *Config {
	return &Config{
		Name: "DC-DiT", EncoderBlocks: 2, Depth: 12, DecoderBlocks: 2, DModel: 768, NumHeads: 12,
		DechunkSigma: 1, FP32RouterDechunk: true, MLPRatio: 4,
		ClassDropoutProb: 0.1, LearnSigma: true, RatioLossWeight: 0.03, RatioBatchSize: 16, DownsampleFactor: 4,
		MultiBudgetDropFractions: []float64{0, 0.1, 0.2, 0.3},
		ImageSize:                256, NumClasses: 1000, NoiseSchedule: "linear", DiffusionSteps: 1000,
	}
}

// officialClasses is the class count the official samplers assume (their
// null label is 1000).
const officialClasses = 1000

// Grid is the latent grid's side (image_size / 8).
func (c *Config) Grid() int { return c.ImageSize / 8 }

// ReadConfig reads an official YAML config, resolving its _base_ chain
// (paths relative to each file, later files overriding earlier ones
// key by key, as config.py merges them).
func ReadConfig(path string) (*Config, error) {
	m, err := readYAML(path, 0)
	if err != nil {
		return nil, err
	}
	c, err := FromMap(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// maxBaseDepth bounds a _base_ chain (a cycle must end in an error).
const maxBaseDepth = 16

func readYAML(path string, depth int) (map[string]any, error) {
	if depth > maxBaseDepth {
		return nil, fmt.Errorf("official: %s: _base_ chain longer than %d files (a cycle?)", path, maxBaseDepth)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("official: config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("official: config %s: %w", path, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	base, ok := m["_base_"]
	if !ok {
		return m, nil
	}
	delete(m, "_base_")
	name, ok := base.(string)
	if !ok {
		return nil, fmt.Errorf("official: config %s: _base_ is %v, want a file name", path, base)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(filepath.Dir(path), name)
	}
	b, err := readYAML(name, depth+1)
	if err != nil {
		return nil, err
	}
	return merge(b, m), nil
}

// merge returns base with over's keys laid over it, maps merged key by key.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = merge(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// FromMap reads a config from its YAML tree, or from the config a training
// checkpoint pickles (loaders' Training.Config: the same tree). Missing
// keys take config.py's defaults; a key of the wrong type, an unsupported
// layout (several stages, blocks without MLP) or unequal per-stage widths
// is an error naming the key.
func FromMap(m map[string]any) (*Config, error) {
	c := Defaults()
	r := reader{root: m}
	r.str("model.name", &c.Name)
	if v, ok := r.get("model.hnet.arch_layout"); ok {
		if err := c.setLayout(v); err != nil {
			r.errs = append(r.errs, err)
		}
	}
	r.pair("model.hnet.d_model", &c.DModel)
	r.pair("model.hnet.num_heads", &c.NumHeads)
	if v, ok := r.get("model.hnet.enc_dec_dim_factor"); ok && v != nil {
		l, ok := v.([]any)
		if !ok || len(l) != 2 || l[1] != nil {
			r.errs = append(r.errs, fmt.Errorf("model.hnet.enc_dec_dim_factor is %v, want [factor, null] (a one-stage model whose router works at the model width)", v))
		} else if f, ok := asInt(l[0]); !ok || f < 1 {
			r.errs = append(r.errs, fmt.Errorf("model.hnet.enc_dec_dim_factor[0] is %v, want a positive integer", l[0]))
		} else {
			c.EncDecDimFactor = f
		}
	}
	r.float("model.hnet.dechunk_kernel_sigma", &c.DechunkSigma)
	r.boolean("model.hnet.fp32_router_dechunk", &c.FP32RouterDechunk)
	r.float("model.mlp_ratio", &c.MLPRatio)
	r.float("training.class_dropout_prob", &c.ClassDropoutProb)
	r.boolean("training.learn_sigma", &c.LearnSigma)
	r.float("training.ratio_loss_weight", &c.RatioLossWeight)
	r.integer("training.ratio_batch_size", &c.RatioBatchSize)
	if v, ok := r.get("training.downsample_factor"); ok {
		// A list is a per-stage factor; one stage has one.
		if l, isList := v.([]any); isList && len(l) == 1 {
			v = l[0]
		}
		if f, ok := asFloat(v); ok {
			c.DownsampleFactor = f
		} else {
			r.errs = append(r.errs, fmt.Errorf("training.downsample_factor is %v, want a number", v))
		}
	}
	r.boolean("training.multi_budget_training", &c.MultiBudgetTraining)
	if v, ok := r.get("training.multi_budget_drop_fractions"); ok {
		l, _ := v.([]any)
		c.MultiBudgetDropFractions = nil
		for _, x := range l {
			f, ok := asFloat(x)
			if !ok {
				r.errs = append(r.errs, fmt.Errorf("training.multi_budget_drop_fractions holds %v, want numbers", x))
				break
			}
			c.MultiBudgetDropFractions = append(c.MultiBudgetDropFractions, f)
		}
	}
	r.integer("data.image_size", &c.ImageSize)
	r.integer("data.num_classes", &c.NumClasses)
	r.str("diffusion.noise_schedule", &c.NoiseSchedule)
	r.integer("diffusion.diffusion_steps", &c.DiffusionSteps)
	if c.EncDecDimFactor == 0 {
		r.errs = append(r.errs, errors.New("model.hnet.enc_dec_dim_factor is null: the encoder and decoder would work at the model width, which the official create_dit does not build for a DC-DiT; want [factor, null]"))
	}
	if c.ImageSize%8 != 0 || c.ImageSize <= 0 {
		r.errs = append(r.errs, fmt.Errorf("data.image_size is %d, want a positive multiple of 8 (the latent grid is image_size/8)", c.ImageSize))
	}
	return c, errors.Join(r.errs...)
}

var layoutItem = regexp.MustCompile(`^([cCdD])(\d+)$`)

// setLayout reads ["c<n>", ["D<depth>"], "c<n>"].
func (c *Config) setLayout(v any) error {
	bad := func(why string) error {
		return fmt.Errorf("model.hnet.arch_layout is %v, want [\"c<n>\", [\"D<depth>\"], \"c<n>\"] (%s)", v, why)
	}
	l, ok := v.([]any)
	if !ok || len(l) != 3 {
		return bad("one stage: an encoder, the main network, a decoder")
	}
	inner, ok := l[1].([]any)
	if !ok || len(inner) != 1 {
		return bad("the main network is one list of one item")
	}
	parse := func(x any, kinds string) (int, error) {
		s, _ := x.(string)
		g := layoutItem.FindStringSubmatch(s)
		if g == nil || !strings.Contains(kinds, g[1]) {
			return 0, bad(fmt.Sprintf("%v is not one of %q followed by a count", x, kinds))
		}
		n, err := strconv.Atoi(g[2])
		if err != nil || n < 1 {
			return 0, bad(fmt.Sprintf("%v: the count must be ≥ 1", x))
		}
		return n, nil
	}
	var err error
	if c.EncoderBlocks, err = parse(l[0], "cC"); err != nil {
		return err
	}
	if c.DecoderBlocks, err = parse(l[2], "cC"); err != nil {
		return err
	}
	// "d" blocks have no MLP, which dcdit's backbone does not build.
	if c.Depth, err = parse(inner[0], "D"); err != nil {
		return err
	}
	return nil
}

// reader walks dotted keys of a YAML tree, gathering type errors.
type reader struct {
	root map[string]any
	errs []error
}

func (r *reader) get(key string) (any, bool) {
	var cur any = r.root
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// field sets *dst to the value at key when there is one, as conv reads it,
// or records that it is not what was wanted.
func field[T any](r *reader, key string, dst *T, conv func(any) (T, bool), want string) {
	if v, ok := r.get(key); ok {
		if x, ok := conv(v); ok {
			*dst = x
		} else {
			r.errs = append(r.errs, fmt.Errorf("%s is %v, want %s", key, v, want))
		}
	}
}

func (r *reader) str(key string, dst *string) {
	field(r, key, dst, func(v any) (string, bool) { s, ok := v.(string); return s, ok }, "a string")
}

func (r *reader) float(key string, dst *float64) { field(r, key, dst, asFloat, "a number") }

func (r *reader) integer(key string, dst *int) { field(r, key, dst, asInt, "an integer") }

func (r *reader) boolean(key string, dst *bool) {
	field(r, key, dst, func(v any) (bool, bool) { b, ok := v.(bool); return b, ok }, "true or false")
}

// pair reads a per-stage list of two equal integers (one stage: the
// conditioning and the main network share the width).
func (r *reader) pair(key string, dst *int) {
	v, ok := r.get(key)
	if !ok {
		return
	}
	l, _ := v.([]any)
	if len(l) != 2 {
		r.errs = append(r.errs, fmt.Errorf("%s is %v, want two equal integers (one stage)", key, v))
		return
	}
	a, ok1 := asInt(l[0])
	b, ok2 := asInt(l[1])
	if !ok1 || !ok2 || a != b || a < 1 {
		r.errs = append(r.errs, fmt.Errorf("%s is %v, want two equal positive integers (one stage)", key, v))
		return
	}
	*dst = a
}

// asInt accepts YAML's and pickle's integers (int, int64) and integral
// floats.
func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), x == int64(int(x))
	case uint64:
		return int(x), x <= math.MaxInt32
	case float64:
		return int(x), x == math.Trunc(x) && math.Abs(x) < 1<<31
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// YAML renders the config in config.py's schema (every section, keys in
// its order), as its save_config writes it: the official train.py and
// sample.py read it back.
func (c *Config) YAML() []byte {
	var b strings.Builder
	num := func(f float64) string {
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	}
	fracs := make([]string, len(c.MultiBudgetDropFractions))
	for i, f := range c.MultiBudgetDropFractions {
		fracs[i] = num(f)
	}
	b.WriteString("# The official DC-DiT's config (AMD-AGI/DynamicChunkingDiT config.py), written by dcdit.\n")
	if c.NumClasses != officialClasses {
		fmt.Fprintf(&b, "# Its sample.py and sample_ddp.py take label %d as the null class: with %d classes,\n# guided sampling there needs that label changed to %d.\n", officialClasses, c.NumClasses, c.NumClasses)
	}
	fmt.Fprintf(&b, "model:\n  name: %s\n  hnet:\n", strconv.Quote(c.Name))
	fmt.Fprintf(&b, "    arch_layout: [\"c%d\", [\"D%d\"], \"c%d\"]\n", c.EncoderBlocks, c.Depth, c.DecoderBlocks)
	fmt.Fprintf(&b, "    d_model: [%d, %d]\n    num_heads: [%d, %d]\n    tie_embeddings: false\n", c.DModel, c.DModel, c.NumHeads, c.NumHeads)
	fmt.Fprintf(&b, "    enc_dec_dim_factor: [%d, null]\n    dechunk_kernel_sigma: %s\n    fp32_router_dechunk: %t\n", c.EncDecDimFactor, num(c.DechunkSigma), c.FP32RouterDechunk)
	fmt.Fprintf(&b, "  mlp_ratio: %s\n", num(c.MLPRatio))
	fmt.Fprintf(&b, "training:\n  class_dropout_prob: %s\n  learn_sigma: %t\n  ratio_loss_weight: %s\n  ratio_batch_size: %d\n  downsample_factor: %s\n",
		num(c.ClassDropoutProb), c.LearnSigma, num(c.RatioLossWeight), c.RatioBatchSize, num(c.DownsampleFactor))
	fmt.Fprintf(&b, "  multi_budget_training: %t\n  multi_budget_drop_fractions: [%s]\n", c.MultiBudgetTraining, strings.Join(fracs, ", "))
	fmt.Fprintf(&b, "data:\n  image_size: %d\n  num_classes: %d\n", c.ImageSize, c.NumClasses)
	fmt.Fprintf(&b, "diffusion:\n  noise_schedule: %s\n  diffusion_steps: %d\n", strconv.Quote(c.NoiseSchedule), c.DiffusionSteps)
	return []byte(b.String())
}

package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// Options choose what a conversion produces.
type Options struct {
	// Layout is the target naming: arch.Original or arch.Diffusers for
	// DiT, arch.Diffusers or arch.Comfy for Z-Image.
	Layout arch.Layout
	// DType casts every tensor to F32, BF16 or F16; dtype.Invalid keeps
	// each tensor's own dtype.
	DType dtype.DType
	// AllowOverflow lets an F16 (or BF16) cast turn a finite value that
	// the type cannot hold into ±Inf instead of failing.
	AllowOverflow bool
	// ComfyPrefix puts "model.diffusion_model." before every name of a
	// ComfyUI output (the form of ComfyUI's full checkpoints).
	ComfyPrefix bool
}

// Part is one source of an output tensor: a whole input tensor, or the
// rows [RowStart, RowEnd) of its first dimension (one of q, k, v in a
// fused qkv). Rows of a row-major tensor are contiguous bytes.
type Part struct {
	Name  string
	DType dtype.DType
	Shape []int64
	// RowEnd is 0 for the whole tensor.
	RowStart, RowEnd int64
}

// byteRange is the part's offset and length within its tensor.
func (p Part) byteRange() (off, n int64) {
	total := numel(p.Shape) * int64(p.DType.Size())
	if p.RowEnd == 0 {
		return 0, total
	}
	row := total / p.Shape[0]
	return p.RowStart * row, (p.RowEnd - p.RowStart) * row
}

func (p Part) String() string {
	if p.RowEnd == 0 {
		return p.Name
	}
	return fmt.Sprintf("%s[%d:%d]", p.Name, p.RowStart, p.RowEnd)
}

// Output is one tensor of the converted checkpoint.
type Output struct {
	Name  string
	DType dtype.DType
	Shape []int64
	// Parts are concatenated along the first dimension, in order; empty
	// for a recomputed tensor.
	Parts []Part
	// Copies must be byte-identical to Parts[0] (per-block embedder
	// copies folded into one); Execute checks them as it reads.
	Copies []string
	// Transform says in words what happens ("rename", "split", "fuse",
	// "replicate", "dedup", "recompute", "copy", each with a cast when
	// the dtype changes).
	Transform string

	// posGrid > 0 marks DiT's 2-D sin-cos table of posGrid² positions,
	// recomputed instead of read.
	posGrid int
}

// Bytes is the tensor's size in the output.
func (o *Output) Bytes() int64 { return numel(o.Shape) * int64(o.DType.Size()) }

// Sources names what the output is made of, for the plan listing.
func (o *Output) Sources() string {
	if o.posGrid > 0 {
		return fmt.Sprintf("(computed: 2-D sin-cos, %d×%d grid)", o.posGrid, o.posGrid)
	}
	parts := make([]string, len(o.Parts))
	for i, p := range o.Parts {
		parts[i] = p.String()
	}
	s := strings.Join(parts, " + ")
	if n := len(o.Copies); n > 0 {
		s += " (checked equal to " + arch.JoinCapped(o.Copies, ", ", 2) + ")"
	}
	return s
}

// Dropped is an input tensor deliberately left out, with the reason.
type Dropped struct {
	Name   string
	Reason string
}

// Plan is a complete conversion: every output tensor and where it comes
// from. It is built from headers only.
type Plan struct {
	Architecture arch.Architecture
	From, To     arch.Layout
	Outputs      []Output
	Dropped      []Dropped
	// Metadata goes into every output file's __metadata__: the input's,
	// plus "format": "pt" and, for DiT, the config with its head count
	// (which DiT files do not otherwise store).
	Metadata map[string]string
	// Config is the config.json written beside a folder output: the
	// input's config.json, if any, updated with the detected config.
	Config map[string]any
	// Warnings carry over from detection (assumed heads or input size).
	Warnings      []string
	AllowOverflow bool
}

// TotalBytes is the size of all output tensors.
func (p *Plan) TotalBytes() int64 {
	var n int64
	for i := range p.Outputs {
		n += p.Outputs[i].Bytes()
	}
	return n
}

// NewPlan plans the conversion of the checkpoint described by in (names,
// shapes, dtypes, metadata, config: no tensor data) to opts. It fails,
// naming the tensors, when the input is not a complete DiT or Z-Image
// checkpoint, when the target layout does not exist for the architecture,
// or when an input tensor would be neither converted nor dropped.
func NewPlan(in arch.Input, opts Options) (*Plan, error) {
	switch opts.DType {
	case dtype.Invalid, dtype.F32, dtype.BF16, dtype.F16:
	default:
		return nil, fmt.Errorf("convert: cannot cast to %s: F32, BF16 and F16 are supported", opts.DType)
	}
	switch opts.Layout {
	case arch.Original, arch.Diffusers, arch.Comfy:
	case arch.DCLayout, "official":
		return nil, fmt.Errorf("convert: layout %q is a DC-DiT's: DC checkpoints are rewritten whole (package dc/hnet/official), not planned tensor by tensor", opts.Layout)
	default:
		return nil, fmt.Errorf("convert: unknown layout %q (want original, diffusers or comfy)", opts.Layout)
	}
	rep := arch.Detect(in)
	if rep.Architecture == arch.Unknown {
		if p, ok, err := vaePlan(in, opts); ok {
			return p, err
		}
	}
	switch rep.Architecture {
	case arch.DiT, arch.ZImage:
	case arch.DCDiT:
		return nil, fmt.Errorf("convert: a DC-DiT checkpoint has no %s layout: it converts to the official DC-DiT's files (--layout official) and back (--layout dcdit)", opts.Layout)
	default:
		return nil, fmt.Errorf("convert: not a DiT or Z-Image checkpoint: %s", strings.Join(rep.Warnings, "; "))
	}
	if err := complete(rep, in); err != nil {
		return nil, err
	}
	b := &builder{
		src:  make(map[string]arch.TensorMeta, len(in.Tensors)),
		used: make(map[string]bool, len(in.Tensors)),
		opts: opts,
		rep:  rep,
	}
	for _, t := range in.Tensors {
		b.src[t.Name] = t
	}
	p := &Plan{Architecture: rep.Architecture, From: rep.Layout, To: opts.Layout, Warnings: assumptions(rep.Warnings), AllowOverflow: opts.AllowOverflow}
	var err error
	if rep.Architecture == arch.DiT {
		err = b.dit(p)
	} else {
		err = b.zimage(p)
	}
	if err != nil {
		return nil, err
	}
	if err := b.leftovers(); err != nil {
		return nil, err
	}
	if err := b.finish(p, in); err != nil {
		return nil, err
	}
	return p, nil
}

// assumptions keeps the detection warnings that say a value was assumed
// or is unknown: those values go into the output's config.json and
// metadata (a head count, an input size, RoPE axes). The others (how
// diffusers' math differs, learned sigma, F16 range) concern running the
// model, not converting it.
func assumptions(warnings []string) []string {
	var out []string
	for _, w := range warnings {
		if strings.Contains(w, "assum") || strings.Contains(w, "not stored") || strings.Contains(w, "ignored") {
			out = append(out, w)
		}
	}
	return out
}

// complete refuses an input with missing or mis-shaped tensors: a
// conversion must not produce a checkpoint its target tools cannot load.
// Unexpected tensors are left to the leftover check, which names them all.
func complete(rep *arch.Report, in arch.Input) error {
	var problems []string
	if len(rep.Missing) > 0 {
		problems = append(problems, "missing "+arch.JoinCapped(rep.Missing, ", ", 8))
	}
	for _, m := range rep.Mismatched {
		problems = append(problems, fmt.Sprintf("tensor %s has shape %v, expected %v", m.Name, m.Found, m.Expected))
	}
	if len(problems) > 0 {
		return fmt.Errorf("convert: %s %s checkpoint is incomplete: %s", rep.Architecture, rep.Layout, strings.Join(problems, "; "))
	}
	return nil
}

type builder struct {
	src  map[string]arch.TensorMeta
	used map[string]bool
	opts Options
	rep  *arch.Report
	outs map[string]*Output
}

// part takes a whole input tensor (its name without the input's prefix).
func (b *builder) part(name string) Part {
	full := b.rep.Prefix + name
	t := b.src[full]
	b.used[full] = true
	return Part{Name: full, DType: t.DType, Shape: t.Shape}
}

func (b *builder) drop(p *Plan, name, reason string) {
	if _, ok := b.src[name]; ok {
		b.used[name] = true
		p.Dropped = append(p.Dropped, Dropped{name, reason})
	}
}

// add appends an output named in the target naming (prefix added here).
func (b *builder) add(p *Plan, name string, shape []int64, transform string, parts ...Part) *Output {
	switch addPrefix := b.opts.Layout == arch.Comfy && b.opts.ComfyPrefix; {
	case addPrefix:
		name = arch.ComfyPrefix + name
		if b.rep.Prefix == "" {
			transform += ", add prefix"
		}
	case b.rep.Prefix != "":
		transform += ", strip prefix"
	}
	dt := b.opts.DType
	if dt == dtype.Invalid && len(parts) > 0 {
		dt = parts[0].DType
	}
	p.Outputs = append(p.Outputs, Output{Name: name, DType: dt, Shape: shape, Parts: parts, Transform: transform})
	return &p.Outputs[len(p.Outputs)-1]
}

// split cuts the rows of a fused tensor into the target shapes' row counts.
func (b *builder) split(name string, shapes [][]int64) []Part {
	whole := b.part(name)
	parts := make([]Part, len(shapes))
	var row int64
	for i, s := range shapes {
		parts[i] = whole
		parts[i].RowStart, parts[i].RowEnd = row, row+s[0]
		row += s[0]
	}
	return parts
}

func shapesOf(e arch.Expected) map[string][]int64 {
	m := make(map[string][]int64, len(e))
	for i, n := range e.Names() {
		m[n] = e.Shape(i)
	}
	return m
}

// convertKeys plans a canonical ↔ diffusers conversion through km (or a
// same-layout copy when the layouts agree), outputs in the target's
// expected order.
func (b *builder) convertKeys(p *Plan, km []arch.KeyMap, canonical arch.Layout, target arch.Expected) {
	byOut := make(map[string]func() *Output)
	shapes := shapesOf(target)
	switch {
	case b.rep.Layout == b.opts.Layout:
		for _, n := range target.Names() {
			byOut[n] = func() *Output { return b.add(p, n, shapes[n], "copy", b.part(n)) }
		}
	case b.opts.Layout != canonical: // canonical → diffusers
		for _, k := range km {
			switch k.Kind {
			case arch.Renamed:
				byOut[k.Others[0]] = func() *Output { return b.add(p, k.Others[0], shapes[k.Others[0]], renamed(k), b.part(k.Name)) }
			case arch.Fused:
				var pieces [][]int64
				for _, o := range k.Others {
					pieces = append(pieces, shapes[o])
				}
				var parts []Part
				for i, o := range k.Others {
					byOut[o] = func() *Output {
						if parts == nil {
							parts = b.split(k.Name, pieces)
						}
						return b.add(p, o, shapes[o], "split", parts[i])
					}
				}
			case arch.Replicated:
				for i, o := range k.Others {
					byOut[o] = func() *Output { return b.add(p, o, shapes[o], fmt.Sprintf("replicate (block %d)", i), b.part(k.Name)) }
				}
			}
		}
	default: // diffusers → canonical
		for _, k := range km {
			switch k.Kind {
			case arch.Renamed:
				byOut[k.Name] = func() *Output { return b.add(p, k.Name, shapes[k.Name], renamed(k), b.part(k.Others[0])) }
			case arch.Fused:
				byOut[k.Name] = func() *Output {
					parts := make([]Part, len(k.Others))
					for i, o := range k.Others {
						parts[i] = b.part(o)
					}
					return b.add(p, k.Name, shapes[k.Name], "fuse", parts...)
				}
			case arch.Replicated:
				byOut[k.Name] = func() *Output {
					o := b.add(p, k.Name, shapes[k.Name], fmt.Sprintf("dedup (%d identical copies)", len(k.Others)), b.part(k.Others[0]))
					for _, c := range k.Others[1:] {
						full := b.rep.Prefix + c
						b.used[full] = true
						o.Copies = append(o.Copies, full)
					}
					return o
				}
			}
		}
	}
	for _, n := range target.Names() {
		if f, ok := byOut[n]; ok {
			f()
		}
	}
}

// renamed names the transform of a KeyMap Renamed entry: most Z-Image
// names are the same in both namings.
func renamed(k arch.KeyMap) string {
	if k.Name == k.Others[0] {
		return "copy"
	}
	return "rename"
}

func (b *builder) dit(p *Plan) error {
	c := b.rep.Config.(*arch.DiTConfig)
	if b.opts.Layout == arch.Comfy {
		return fmt.Errorf("convert: DiT has no ComfyUI layout (want original or diffusers)")
	}
	target := arch.ExpectedDiT(c, b.opts.Layout)
	b.convertKeys(p, arch.DiTDiffusersKeys(c), arch.Original, target)
	switch {
	case b.opts.Layout == arch.Diffusers:
		// diffusers builds the fixed table itself; an original file's copy,
		// or a stray one in a diffusers file, has no place to go.
		b.drop(p, "pos_embed", "fixed 2-D sin-cos table; diffusers computes it")
	case b.rep.Layout == arch.Diffusers:
		grid := c.InputSize / c.PatchSize
		o := Output{Name: "pos_embed", DType: b.opts.DType, Shape: []int64{1, int64(grid * grid), int64(c.HiddenSize)}, Transform: "recompute", posGrid: grid}
		if o.DType == dtype.Invalid {
			o.DType = b.src[b.rep.Prefix+"pos_embed.proj.weight"].DType
		}
		b.drop(p, "pos_embed", "recomputed: the table is fixed, and a diffusers file's copy is not read by diffusers")
		// The original state_dict lists pos_embed right after x_embedder.
		at := slices.IndexFunc(p.Outputs, func(o Output) bool { return o.Name == "x_embedder.proj.bias" }) + 1
		p.Outputs = slices.Insert(p.Outputs, at, o)
	}
	return nil
}

func (b *builder) zimage(p *Plan) error {
	c := b.rep.Config.(*arch.ZImageConfig)
	if b.opts.Layout == arch.Original {
		return fmt.Errorf("convert: Z-Image's original (Tongyi) naming is the diffusers one: use --layout diffusers, or comfy")
	}
	b.convertKeys(p, arch.ZImageDiffusersKeys(c), arch.Comfy, arch.ExpectedZImage(c, b.opts.Layout))
	return nil
}

// leftovers fails when an input tensor is neither read nor dropped.
func (b *builder) leftovers() error {
	var left []string
	for name := range b.src {
		if !b.used[name] {
			left = append(left, name)
		}
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	return fmt.Errorf("convert: %d input tensors would be neither converted nor dropped (not part of a %s %s checkpoint): %s",
		len(left), b.rep.Architecture, b.rep.Layout, arch.JoinCapped(left, ", ", 8))
}

// finish sets the casts, metadata and config.json.
func (b *builder) finish(p *Plan, in arch.Input) error {
	for i := range p.Outputs {
		o := &p.Outputs[i]
		for _, pt := range o.Parts {
			if pt.DType == o.DType {
				continue
			}
			if !castable(pt.DType) {
				return fmt.Errorf("convert: tensor %s is %s; only F32, BF16, F16 and F64 tensors can be cast", pt.Name, pt.DType)
			}
			o.Transform += fmt.Sprintf(", cast %s→%s", pt.DType, o.DType)
			break
		}
		for _, c := range o.Copies {
			if t := b.src[c]; t.DType != o.Parts[0].DType {
				return fmt.Errorf("convert: tensor %s is %s but its copy %s is %s; per-block copies must be identical", c, t.DType, o.Parts[0].Name, o.Parts[0].DType)
			}
		}
	}
	p.Metadata = map[string]string{}
	maps.Copy(p.Metadata, in.Metadata)
	p.Metadata["format"] = "pt"
	cfg := map[string]any{}
	maps.Copy(cfg, in.Config)
	switch c := b.rep.Config.(type) {
	case *arch.DiTConfig:
		text, err := json.Marshal(c)
		if err != nil {
			return err
		}
		p.Metadata[arch.DiTConfigKey] = string(text)
		setKnown(cfg, arch.DiTDiffusersConfig(c))
	case *arch.ZImageConfig:
		setKnown(cfg, arch.ZImageDiffusersConfig(c))
	}
	p.Config = cfg
	return nil
}

// setKnown copies the values of src that are known (an unknown RoPE axis
// split is a nil slice) over dst.
func setKnown(dst, src map[string]any) {
	for k, v := range src {
		if l, ok := v.([]int64); ok && l == nil {
			continue
		}
		dst[k] = v
	}
}

func castable(d dtype.DType) bool {
	return d == dtype.F32 || d == dtype.BF16 || d == dtype.F16 || d == dtype.F64
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

package zimage

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Param is one parameter tensor in float32.
type Param = loaders.Dense

// Weights are a Z-Image transformer's parameters in the package's one
// internal layout, whatever naming the checkpoint used, with the
// configuration they imply. The internal names are ComfyUI's without its
// prefix (arch.ExpectedZImage with arch.Comfy): the attention projections
// are one fused qkv = cat(to_q, to_k, to_v), which is the [q | k | v]
// layout ops.Attention reads.
type Weights struct {
	Config *arch.ZImageConfig
	Params map[string]*Param
	// Source describes where the weights came from (path and naming).
	Source string
	// Warnings carry over from detection.
	Warnings []string
}

// LoadOptions adjust loading.
type LoadOptions struct {
	// Config is a parsed config.json (diffusers' transformer/config.json,
	// or any object with its keys). It supplies what tensor shapes cannot
	// tell: the head count when there are no q/k norms, axes_dims,
	// axes_lens, rope_theta, t_scale, norm_eps. A model folder's own
	// config.json is used when Config is nil.
	Config map[string]any
	// KeepBF16 makes LoadModel keep every Linear weight (a 2-D matrix
	// named *.weight) that the checkpoint stores as BF16 as bfloat16 in
	// memory, at half the bytes of float32, outside the parameter arena;
	// the forward pass reads them through ops.LinearBF16, whose outputs
	// equal those of the model loaded in float32, bit for bit. The pad
	// tokens, vectors and matrices stored in other dtypes become float32
	// in the arena as without it. Such a model is for inference only:
	// none of its ops has a backward pass through those weights, Save
	// refuses it and Backbone refuses to run it with gradients. Load
	// ignores the option.
	KeepBF16 bool
}

// Load reads a Z-Image transformer checkpoint in the diffusers/Tongyi
// naming or the ComfyUI naming (fused attention.qkv, attention.out,
// q_norm/k_norm, x_embedder/final_layer, optionally under
// "model.diffusion_model."), and returns its parameters in the internal
// layout. Missing, unexpected and mis-shaped tensors are reported
// together, by name. To build a model from a checkpoint, LoadModel keeps
// one copy of the values where Load and New hold two.
func Load(path string, opts LoadOptions) (*Weights, error) {
	src, err := openSource(path, opts)
	if err != nil {
		return nil, err
	}
	defer src.ck.Close()
	w := &Weights{Config: src.cfg, Params: map[string]*Param{}, Source: src.describe(), Warnings: src.rep.Warnings}
	exp := arch.ExpectedZImage(src.cfg, arch.Comfy)
	for i, name := range exp.Names() {
		shape := make([]int, len(exp.Shape(i)))
		n := 1
		for j, d := range exp.Shape(i) {
			shape[j] = int(d)
			n *= int(d)
		}
		p := &Param{Shape: shape, Data: make([]float32, n)}
		if err := src.fill(name, p.Data); err != nil {
			return nil, err
		}
		w.Params[name] = p
	}
	return w, nil
}

// LoadModel reads a checkpoint as Load does and builds its model, decoding
// every tensor straight into the model's arena (loaders.Tensor's
// DecodeFloat32 reads the file in chunks, without mapping it): the values
// are resident once, which is what lets a 6 B Z-Image load where Load and
// New would hold 2 × 24.6 GB. With opts.KeepBF16 a BF16 checkpoint's
// Linear weights stay bfloat16 (LoadOptions.KeepBF16), which halves that
// again. It returns detection's warnings beside the model.
func LoadModel(path string, opts LoadOptions) (*Model, []string, error) {
	src, err := openSource(path, opts)
	if err != nil {
		return nil, nil, err
	}
	defer src.ck.Close()
	m := newModel(src.cfg)
	var keep map[string]bool
	if opts.KeepBF16 {
		keep, m.bf16 = src.bf16Matrices(), map[string]*ops.BF16Matrix{}
	}
	var specs []params.Spec
	for _, s := range paramSpecs(src.cfg) {
		if !keep[s.Name] {
			specs = append(specs, s)
			continue
		}
		w := &ops.BF16Matrix{Rows: s.Rows, Cols: s.Cols, Data: make([]uint16, s.Rows*s.Cols)}
		if err := src.fillBF16(s.Name, w.Data); err != nil {
			return nil, nil, err
		}
		m.bf16[s.Name] = w
	}
	set, err := params.New(specs)
	if err != nil {
		return nil, nil, fmt.Errorf("zimage: %s: %w", path, err)
	}
	m.Params = set
	for _, p := range set.List() {
		if err := src.fill(p.Name, p.Values()); err != nil {
			return nil, nil, err
		}
		m.tensors[p.Name] = p
	}
	return m, src.rep.Warnings, nil
}

// source is an opened, checked Z-Image checkpoint.
type source struct {
	path string
	ck   *loaders.Checkpoint
	rep  *arch.Report
	cfg  *arch.ZImageConfig
	// buf is readBF16's read buffer, shared by the tensors: a garbage
	// buffer per tensor would stay resident until the garbage collector's
	// next cycle, which a heap of billions of weights puts off.
	buf []byte
}

// openSource opens path, detects its naming and configuration, and
// refuses it unless every expected tensor is there with its shape.
func openSource(path string, opts LoadOptions) (*source, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config}
	if opts.Config != nil {
		in.Config = opts.Config
	}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	rep := arch.Detect(in)
	fail := func(err error) (*source, error) {
		ck.Close()
		return nil, err
	}
	if rep.Architecture != arch.ZImage {
		return fail(fmt.Errorf("zimage: %s holds a %s checkpoint, not a Z-Image transformer", path, rep.Architecture))
	}
	var problems []string
	if len(rep.Missing) > 0 {
		problems = append(problems, "missing "+arch.JoinCapped(rep.Missing, ", ", 8))
	}
	if len(rep.Unexpected) > 0 {
		problems = append(problems, "unexpected "+arch.JoinCapped(rep.Unexpected, ", ", 8))
	}
	for _, m := range rep.Mismatched {
		problems = append(problems, fmt.Sprintf("tensor %s has shape %v, want %v", m.Name, m.Found, m.Expected))
	}
	if len(problems) > 0 {
		return fail(fmt.Errorf("zimage: %s (%s naming): %s", path, rep.Layout, strings.Join(problems, "; ")))
	}
	cfg := rep.Config.(*arch.ZImageConfig)
	if err := CheckConfig(cfg); err != nil {
		return fail(fmt.Errorf("zimage: %s: %w", path, err))
	}
	return &source{path: path, ck: ck, rep: rep, cfg: cfg}, nil
}

// describe names the checkpoint and its naming.
func (s *source) describe() string { return fmt.Sprintf("%s (%s naming)", s.path, s.rep.Layout) }

// fill decodes the tensor of internal name into dst.
func (s *source) fill(name string, dst []float32) error {
	return s.each(name, len(dst), func(t *loaders.Tensor, at, n int) error {
		if err := t.DecodeFloat32(dst[at : at+n]); err != nil {
			return fmt.Errorf("zimage: %w", err)
		}
		return nil
	})
}

// fillBF16 copies the BF16 tensor of internal name into dst.
func (s *source) fillBF16(name string, dst []uint16) error {
	return s.each(name, len(dst), func(t *loaders.Tensor, at, n int) error {
		if s.buf == nil {
			s.buf = make([]byte, bf16Chunk)
		}
		return readBF16(t, dst[at:at+n], s.buf)
	})
}

// parts returns the checkpoint names of the tensors that make up the
// tensor of internal name: in the diffusers naming, a fused tensor's parts
// (to_q, to_k, to_v), whose concatenation along rows it is.
func (s *source) parts(name string) []string {
	if s.rep.Layout != arch.Comfy {
		return arch.ZImageDiffusersKey(name, s.cfg).Others
	}
	return []string{name}
}

// each calls read for each part of the tensor of internal name, which
// holds size values, with the part's first value and its value count: the
// parts go to consecutive ranges.
func (s *source) each(name string, size int, read func(t *loaders.Tensor, at, n int) error) error {
	at := 0
	for _, part := range s.parts(name) {
		t, ok := s.ck.Tensor(s.rep.Prefix + part)
		if !ok {
			return fmt.Errorf("zimage: %s: tensor %q missing", s.path, s.rep.Prefix+part)
		}
		n := int(t.NumElements())
		if at+n > size {
			return fmt.Errorf("zimage: %s: tensor %q: %d values overflow %s's %d", s.path, s.rep.Prefix+part, n, name, size)
		}
		if err := read(t, at, n); err != nil {
			return err
		}
		at += n
	}
	if at != size {
		return fmt.Errorf("zimage: %s: the tensors of %s hold %d values, want %d", s.path, name, at, size)
	}
	return nil
}

// bf16Matrices returns the internal names of the Linear weights (2-D,
// named *.weight; the pad tokens are rows, not weights) whose every part
// the checkpoint stores as BF16.
func (s *source) bf16Matrices() map[string]bool {
	exp := arch.ExpectedZImage(s.cfg, arch.Comfy)
	keep := map[string]bool{}
	for i, name := range exp.Names() {
		if len(exp.Shape(i)) != 2 || !strings.HasSuffix(name, ".weight") {
			continue
		}
		all := true
		for _, part := range s.parts(name) {
			t, ok := s.ck.Tensor(s.rep.Prefix + part)
			all = all && ok && t.DType == dtype.BF16
		}
		keep[name] = all
	}
	return keep
}

// bf16Chunk is readBF16's read size, DecodeFloat32's.
const bf16Chunk = 4 << 20

// readBF16 copies a BF16 tensor's bit patterns into dst, which holds
// exactly its values, reading the file through buf (an even number of
// bytes) with pread (Tensor.Section) as DecodeFloat32 does, so that the
// file is never mapped beside the copy.
func readBF16(t *loaders.Tensor, dst []uint16, buf []byte) error {
	sec, err := t.Section()
	if err != nil {
		return fmt.Errorf("zimage: %s: tensor %q: %w", t.File, t.Name, err)
	}
	if want := 2 * int64(len(dst)); sec.Size() != want {
		return fmt.Errorf("zimage: %s: tensor %q: %d bytes of data, want %d for %v %s", t.File, t.Name, sec.Size(), want, t.Shape, t.DType)
	}
	for done := 0; done < len(dst); {
		n := min(len(buf)/2, len(dst)-done)
		raw := buf[:2*n]
		if _, err := sec.ReadAt(raw, 2*int64(done)); err != nil {
			return fmt.Errorf("zimage: %s: tensor %q: %w", t.File, t.Name, err)
		}
		for i := range n {
			dst[done+i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		done += n
	}
	return nil
}

// CheckConfig rejects configurations the model cannot run, naming the
// field: detection fills what it can and leaves the rest zero.
func CheckConfig(c *arch.ZImageConfig) error {
	if c.SeqMultiOf < 0 || c.SeqMultiOf > 1024 {
		return fmt.Errorf("seq_multi_of %d, want 1 to 1024 (0: the reference's %d)", c.SeqMultiOf, arch.DefaultSeqMultiOf)
	}
	if c.NHeads < 1 || c.Dim%c.NHeads != 0 {
		return fmt.Errorf("dim %d does not split into %d heads", c.Dim, c.NHeads)
	}
	if c.NKVHeads != c.NHeads {
		// The reference attention (and diffusers, which ignores
		// n_kv_heads) uses as many key/value heads as query heads.
		return fmt.Errorf("n_kv_heads %d differs from n_heads %d; grouped key/value heads are not supported", c.NKVHeads, c.NHeads)
	}
	if len(c.AxesDims) != 3 {
		// Positions are (frame or caption index, row, column).
		return fmt.Errorf("axes_dims %v: want the widths of the 3 RoPE axes (give LoadOptions.Config a config.json with axes_dims when the checkpoint does not imply them)", c.AxesDims)
	}
	sum := 0
	for i, d := range c.AxesDims {
		if d <= 0 || d%2 != 0 {
			return fmt.Errorf("axes_dims[%d] = %d, want a positive even width", i, d)
		}
		sum += int(d)
	}
	if sum != c.HeadDim() {
		return fmt.Errorf("axes_dims %v sum to %d, want the head width %d", c.AxesDims, sum, c.HeadDim())
	}
	if c.PatchSize < 1 || c.FPatchSize < 1 {
		return fmt.Errorf("patch sizes %d (height/width) and %d (frames) must be positive", c.PatchSize, c.FPatchSize)
	}
	if !(c.NormEps >= 0) {
		return fmt.Errorf("norm_eps %v, want ≥ 0", c.NormEps)
	}
	return nil
}

package qwen3

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// Options adjust OpenWith.
type Options struct {
	// Config is a parsed config.json (transformers' Qwen3Config keys). It
	// replaces the model folder's own; a single file has none.
	Config map[string]any
}

// Open loads a Qwen3 text encoder with default options; see OpenWith.
func Open(path string) (*Model, error) { return OpenWith(path, Options{}) }

// OpenWith loads a Qwen3 text encoder from path: a safetensors file (or
// any checkpoint loaders.Open reads), a sharded index, a text_encoder/
// folder with its config.json, or a pipeline folder holding
// text_encoder/. Missing, unexpected and mis-shaped tensors are reported
// together; a tensor holding NaN or ±Inf is refused. BF16 projection and
// embedding matrices are kept in BF16.
func OpenWith(path string, opts Options) (*Model, error) {
	if sub := filepath.Join(path, "text_encoder"); isDir(sub) {
		path = sub
	}
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("qwen3: %w", err)
	}
	defer ck.Close()
	cfgJSON := ck.Config
	if opts.Config != nil {
		cfgJSON = opts.Config
	}

	prefix, err := namePrefix(ck)
	if err != nil {
		return nil, fmt.Errorf("qwen3: %s: %w", path, err)
	}
	tensors := map[string]*loaders.Tensor{}
	shapesByName := map[string][]int64{}
	var unexpected []string
	for _, t := range ck.Tensors {
		name, ok := strings.CutPrefix(t.Name, prefix)
		switch {
		case t.Name == "lm_head.weight", ok && isBuffer(name):
			// The LM head is never used by an encoder, and inv_freq is a
			// buffer older checkpoints saved that RoPE recomputes.
			continue
		case !ok:
			unexpected = append(unexpected, strconv.Quote(t.Name))
			continue
		}
		tensors[name], shapesByName[name] = t, t.Shape
	}
	cfg, warnings, err := resolveConfig(cfgJSON, shapes(shapesByName))
	if err != nil {
		return nil, fmt.Errorf("qwen3: %s: config: %w", path, err)
	}
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("qwen3: %s: %w", path, err)
	}
	want := expected(cfg)
	var missing, problems []string
	for _, name := range sortedKeys(want) {
		t, ok := tensors[name]
		switch {
		case !ok:
			missing = append(missing, strconv.Quote(prefix+name))
		case !slices.Equal(t.Shape, want[name]):
			at := ""
			if t.File != path {
				at = t.File + ": "
			}
			problems = append(problems, fmt.Sprintf("%stensor %q: shape %v, want %v", at, t.Name, t.Shape, want[name]))
		}
	}
	for _, name := range sortedKeys(tensors) {
		if _, ok := want[name]; !ok {
			unexpected = append(unexpected, strconv.Quote(prefix+name))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing tensors "+arch.JoinCapped(missing, ", ", 8))
	}
	if len(unexpected) > 0 {
		problems = append(problems, fmt.Sprintf("unexpected tensors %s (not in a %d-layer Qwen3Model)", arch.JoinCapped(unexpected, ", ", 8), cfg.NumHiddenLayers))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("qwen3: %s: %s", path, strings.Join(problems, "; "))
	}

	m := &Model{Config: cfg, Source: path, Warnings: append(warnings, ck.Warnings...), layers: make([]layer, cfg.NumHiddenLayers)}
	vec := func(name string) ([]float32, error) { return readVector(tensors[name]) }
	mat := func(name string) (matrix, error) { return readMatrix(tensors[name]) }
	if m.embed, err = mat("embed_tokens.weight"); err != nil {
		return nil, err
	}
	if m.norm, err = vec("norm.weight"); err != nil {
		return nil, err
	}
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("layers.%d.", i)
		for _, f := range []struct {
			name string
			dst  *[]float32
		}{
			{"input_layernorm.weight", &l.inNorm}, {"post_attention_layernorm.weight", &l.postNorm},
			{"self_attn.q_norm.weight", &l.qNorm}, {"self_attn.k_norm.weight", &l.kNorm},
		} {
			if *f.dst, err = vec(p + f.name); err != nil {
				return nil, err
			}
		}
		for _, f := range []struct {
			name string
			dst  *matrix
		}{
			{"self_attn.q_proj.weight", &l.q}, {"self_attn.k_proj.weight", &l.k}, {"self_attn.v_proj.weight", &l.v},
			{"self_attn.o_proj.weight", &l.o}, {"mlp.gate_proj.weight", &l.gate}, {"mlp.up_proj.weight", &l.up},
			{"mlp.down_proj.weight", &l.down},
		} {
			if *f.dst, err = mat(p + f.name); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// namePrefix finds the checkpoint's naming: Qwen3Model's names, or a
// Qwen3ForCausalLM's with "model." before each. The embedding table says
// which.
func namePrefix(ck *loaders.Checkpoint) (string, error) {
	var found, names []string
	for _, t := range ck.Tensors {
		if p, ok := strings.CutSuffix(t.Name, "embed_tokens.weight"); ok {
			found, names = append(found, p), append(names, strconv.Quote(t.Name))
		}
	}
	switch {
	case len(found) == 0:
		return "", fmt.Errorf("no embed_tokens.weight: not a Qwen3 text encoder")
	case len(found) > 1:
		return "", fmt.Errorf("several embedding tables (%s): want one model's checkpoint", arch.JoinCapped(names, ", ", 8))
	case found[0] != "" && found[0] != "model.":
		return "", fmt.Errorf("tensor %s: want Qwen3Model's names with or without the \"model.\" prefix", names[0])
	}
	return found[0], nil
}

// isBuffer reports whether name is RoPE's inv_freq buffer, which some
// checkpoints carry at the model or at each layer's attention.
func isBuffer(name string) bool {
	return strings.HasSuffix(name, "rotary_emb.inv_freq")
}

// readVector decodes a tensor to float32 and checks it is finite.
func readVector(t *loaders.Tensor) ([]float32, error) {
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("qwen3: %s: tensor %q: dtype %s, want a floating-point type", t.File, t.Name, t.DType)
	}
	v := make([]float32, t.NumElements())
	if err := t.DecodeFloat32(v); err != nil {
		return nil, fmt.Errorf("qwen3: %w", err)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("qwen3: %s: tensor %q: element %d is %v, want finite weights", t.File, t.Name, i, x)
		}
	}
	return v, nil
}

// readMatrix loads a 2-D tensor: BF16 as it is stored, any other dtype
// decoded to float32.
func readMatrix(t *loaders.Tensor) (matrix, error) {
	w := matrix{rows: int(t.Shape[0]), cols: int(t.Shape[1])}
	if t.DType != dtype.BF16 {
		v, err := readVector(t)
		w.f32 = v
		return w, err
	}
	sec, err := t.Section()
	if err != nil {
		return w, fmt.Errorf("qwen3: %s: tensor %q: %w", t.File, t.Name, err)
	}
	w.bf16 = make([]uint16, t.NumElements())
	if want := 2 * int64(len(w.bf16)); sec.Size() != want {
		return w, fmt.Errorf("qwen3: %s: tensor %q: %d bytes of data, want %d for %v BF16", t.File, t.Name, sec.Size(), want, t.Shape)
	}
	buf := make([]byte, min(int64(readChunk), sec.Size()))
	for done := 0; done < len(w.bf16); {
		n := min(len(buf)/2, len(w.bf16)-done)
		if _, err := sec.ReadAt(buf[:2*n], 2*int64(done)); err != nil {
			return w, fmt.Errorf("qwen3: %s: tensor %q: %w", t.File, t.Name, err)
		}
		for i := range n {
			h := binary.LittleEndian.Uint16(buf[2*i:])
			if h&0x7f80 == 0x7f80 {
				return w, fmt.Errorf("qwen3: %s: tensor %q: element %d is %v, want finite weights", t.File, t.Name, done+i, dtype.BF16ToFloat32(h))
			}
			w.bf16[done+i] = h
		}
		done += n
	}
	return w, nil
}

// readChunk bounds the staging buffer of a BF16 read, small beside any
// model so that loading keeps one copy of the weights resident.
const readChunk = 4 << 20

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

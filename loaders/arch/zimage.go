package arch

import (
	"fmt"
	"strings"
)

// ZImageConfig is the configuration of a Z-Image transformer
// (Tongyi-MAI/Z-Image ZImageTransformer2DModel).
type ZImageConfig struct {
	Dim            int     `json:"dim"`
	NLayers        int     `json:"n_layers"`
	NRefinerLayers int     `json:"n_refiner_layers"`
	NHeads         int     `json:"n_heads"`
	NKVHeads       int     `json:"n_kv_heads"`
	InChannels     int     `json:"in_channels"`
	PatchSize      int     `json:"patch_size"`
	FPatchSize     int     `json:"f_patch_size"`
	CapFeatDim     int     `json:"cap_feat_dim"`
	QKNorm         bool    `json:"qk_norm"`
	NormEps        float64 `json:"norm_eps"`
	RopeTheta      float64 `json:"rope_theta"`
	TScale         float64 `json:"t_scale"`
	AxesDims       []int64 `json:"axes_dims,omitempty"`
	AxesLens       []int64 `json:"axes_lens,omitempty"`
	// FFNHidden is int(dim/3·8) in the reference code.
	FFNHidden int `json:"ffn_hidden"`
	// AdaLNDim is the width of the timestep conditioning (min(dim, 256)).
	AdaLNDim int `json:"adaln_dim"`
	// TMidDim is the hidden width of the timestep MLP (1024 in the reference).
	TMidDim int `json:"t_embedder_mid_size"`
	// FrequencySize is the width of the sinusoidal timestep input (256).
	FrequencySize int `json:"frequency_embedding_size"`
	// SeqMultiOf is the multiple every item's image and caption sequences
	// are padded to with learned pad tokens; 0 means the reference's 32
	// (SEQ_MULTI_OF, a constant there). Small models set it smaller: at
	// 64 image tokens and captions of a few words, padding to 32 costs
	// more than the tokens themselves, and a DC model's kept tokens
	// would save compute only in steps of 32.
	SeqMultiOf int `json:"seq_multi_of,omitempty"`
}

// DefaultSeqMultiOf is the reference's SEQ_MULTI_OF.
const DefaultSeqMultiOf = 32

// SeqMultiple is the padding multiple: SeqMultiOf, or
// DefaultSeqMultiOf when it is 0.
func (c *ZImageConfig) SeqMultiple() int {
	if c.SeqMultiOf > 0 {
		return c.SeqMultiOf
	}
	return DefaultSeqMultiOf
}

// HeadDim is the per-head width.
func (c *ZImageConfig) HeadDim() int {
	if c.NHeads == 0 {
		return 0
	}
	return c.Dim / c.NHeads
}

// PatchKey is the suffix of the diffusers embedder names ("2-1").
func (c *ZImageConfig) PatchKey() string { return fmt.Sprintf("%d-%d", c.PatchSize, c.FPatchSize) }

// patchIn is the flattened patch width pF·pH·pW·C.
func (c *ZImageConfig) patchIn() int64 {
	return int64(c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels)
}

// Reference defaults (Tongyi config/model.py; HF Z-Image-Turbo config.json).
const (
	zDefaultHeadDim = 128
	zDefaultEps     = 1e-5
	zDefaultTheta   = 256.0
	zDefaultTScale  = 1000.0
)

func detectZImage(r *Report, k keySet, in Input, layout Layout) (Expected, func(string) string) {
	r.Architecture, r.Layout = ZImage, layout
	c := &ZImageConfig{PatchSize: 2, FPatchSize: 1, NormEps: zDefaultEps, RopeTheta: zDefaultTheta, TScale: zDefaultTScale, FrequencySize: 256}
	cfg := in.Config
	if ps, ok := intsFrom(cfg, "all_patch_size"); ok && len(ps) > 0 {
		c.PatchSize = int(ps[0])
	}
	if fs, ok := intsFrom(cfg, "all_f_patch_size"); ok && len(fs) > 0 {
		c.FPatchSize = int(fs[0])
	}
	embed, qnorm, attn := "x_embedder.weight", "attention.q_norm.weight", "attention.qkv.weight"
	if layout == Diffusers {
		// The embedder key carries the patch sizes: all_x_embedder.{p}-{fp}.
		for name := range k {
			if rest, ok := strings.CutPrefix(name, "all_x_embedder."); ok && strings.HasSuffix(rest, ".weight") {
				var p, f int
				if _, err := fmt.Sscanf(strings.TrimSuffix(rest, ".weight"), "%d-%d", &p, &f); err == nil {
					c.PatchSize, c.FPatchSize = p, f
				}
			}
		}
		embed, qnorm, attn = "all_x_embedder."+c.PatchKey()+".weight", "attention.norm_q.weight", "attention.to_k.weight"
	}
	c.Dim = int(k.dim(embed, 0))
	if per := c.FPatchSize * c.PatchSize * c.PatchSize; per > 0 {
		c.InChannels = int(k.dim(embed, 1)) / per
	}
	c.NLayers = k.count("layers")
	c.NRefinerLayers = k.count("noise_refiner")
	if cr := k.count("context_refiner"); cr != c.NRefinerLayers {
		r.warnf("%d noise_refiner blocks but %d context_refiner blocks; the reference builds the same number of each", c.NRefinerLayers, cr)
	}
	c.CapFeatDim = int(k.dim("cap_embedder.1.weight", 1))
	c.FFNHidden = int(k.dim("layers.0.feed_forward.w1.weight", 0))
	c.AdaLNDim = int(k.dim("t_embedder.mlp.2.weight", 0))
	c.TMidDim = int(k.dim("t_embedder.mlp.0.weight", 0))
	if f := k.dim("t_embedder.mlp.0.weight", 1); f > 0 {
		c.FrequencySize = int(f)
	}
	headDim := int(k.dim("layers.0."+qnorm, 0))
	c.QKNorm = headDim > 0
	if n, ok := intFrom(cfg, "n_heads"); ok {
		c.NHeads = int(n)
	} else if headDim > 0 {
		c.NHeads = c.Dim / headDim
	} else if c.Dim > 0 {
		c.NHeads = max(1, c.Dim/zDefaultHeadDim)
		r.warnf("no q/k norm weights tell the head width; assuming %d (%d heads)", zDefaultHeadDim, c.NHeads)
	}
	hd := c.HeadDim()
	if n, ok := intFrom(cfg, "n_kv_heads"); ok {
		c.NKVHeads = int(n)
	} else if hd > 0 {
		rows := int(k.dim("layers.0."+attn, 0))
		if layout == Comfy {
			// Fused qkv rows: (n_heads + 2·n_kv_heads)·head_dim.
			c.NKVHeads = (rows/hd - c.NHeads) / 2
		} else {
			c.NKVHeads = rows / hd
		}
	}
	if v, ok := floatFrom(cfg, "norm_eps"); ok {
		c.NormEps = v
	}
	if v, ok := floatFrom(cfg, "rope_theta"); ok {
		c.RopeTheta = v
	}
	if v, ok := floatFrom(cfg, "t_scale"); ok {
		c.TScale = v
	}
	if v, ok := intFrom(cfg, "seq_multi_of"); ok && v != DefaultSeqMultiOf {
		c.SeqMultiOf = int(v)
	}
	if v, ok := boolFrom(cfg, "qk_norm"); ok && v != c.QKNorm {
		r.warnf("config.json says qk_norm=%v but the weights say %v", v, c.QKNorm)
	}
	if v, ok := intsFrom(cfg, "axes_dims"); ok {
		c.AxesDims = v
	} else if hd == zDefaultHeadDim {
		c.AxesDims = []int64{32, 48, 48}
	}
	if v, ok := intsFrom(cfg, "axes_lens"); ok {
		c.AxesLens = v
	} else if hd == zDefaultHeadDim {
		c.AxesLens = []int64{1536, 512, 512}
	}
	if c.AxesDims == nil {
		r.warnf("the RoPE axis split of the %d-wide heads is not stored in the weights; supply a config.json with axes_dims", hd)
	}
	if dim, ok := intFrom(cfg, "dim"); ok && int(dim) != c.Dim {
		r.warnf("config.json says dim %d, but the weights have %d", dim, c.Dim)
	}
	r.Config = c
	if c.Dim == 0 {
		r.warnf("cannot infer the configuration: the patch embedding %q is missing", embed)
		return nil, zimageBucket
	}
	return ExpectedZImage(c, layout), zimageBucket
}

// ExpectedZImage lists the tensors of a Z-Image transformer in the given
// naming (Diffusers, which is also the Tongyi naming, or Comfy).
func ExpectedZImage(c *ZImageConfig, layout Layout) Expected {
	D, A, M := int64(c.Dim), int64(c.AdaLNDim), int64(c.TMidDim)
	hd := int64(c.HeadDim())
	q, kv := int64(c.NHeads)*hd, int64(c.NKVHeads)*hd
	ffn := int64(c.FFNHidden)
	var e Expected
	add := func(name string, shape ...int64) { e = append(e, spec{name, shape}) }
	embed, final := "all_x_embedder."+c.PatchKey(), "all_final_layer."+c.PatchKey()
	if layout == Comfy {
		embed, final = "x_embedder", "final_layer"
	}
	add(embed+".weight", D, c.patchIn())
	add(embed+".bias", D)
	add(final+".adaLN_modulation.1.weight", D, A)
	add(final+".adaLN_modulation.1.bias", D)
	add(final+".linear.weight", c.patchIn(), D)
	add(final+".linear.bias", c.patchIn())
	add("t_embedder.mlp.0.weight", M, int64(c.FrequencySize))
	add("t_embedder.mlp.0.bias", M)
	add("t_embedder.mlp.2.weight", A, M)
	add("t_embedder.mlp.2.bias", A)
	add("cap_embedder.0.weight", int64(c.CapFeatDim))
	add("cap_embedder.1.weight", D, int64(c.CapFeatDim))
	add("cap_embedder.1.bias", D)
	add("x_pad_token", 1, D)
	add("cap_pad_token", 1, D)
	block := func(b string, modulated bool) {
		if layout == Comfy {
			add(b+"attention.qkv.weight", q+2*kv, D)
			add(b+"attention.out.weight", D, q)
			if c.QKNorm {
				add(b+"attention.q_norm.weight", hd)
				add(b+"attention.k_norm.weight", hd)
			}
		} else {
			add(b+"attention.to_q.weight", q, D)
			add(b+"attention.to_k.weight", kv, D)
			add(b+"attention.to_v.weight", kv, D)
			add(b+"attention.to_out.0.weight", D, q)
			if c.QKNorm {
				add(b+"attention.norm_q.weight", hd)
				add(b+"attention.norm_k.weight", hd)
			}
		}
		for _, n := range []string{"attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"} {
			add(b+n+".weight", D)
		}
		add(b+"feed_forward.w1.weight", ffn, D)
		add(b+"feed_forward.w2.weight", D, ffn)
		add(b+"feed_forward.w3.weight", ffn, D)
		if modulated {
			add(b+"adaLN_modulation.0.weight", 4*D, A)
			add(b+"adaLN_modulation.0.bias", 4*D)
		}
	}
	for i := 0; i < c.NRefinerLayers; i++ {
		block(fmt.Sprintf("noise_refiner.%d.", i), true)
	}
	for i := 0; i < c.NRefinerLayers; i++ {
		block(fmt.Sprintf("context_refiner.%d.", i), false)
	}
	for i := 0; i < c.NLayers; i++ {
		block(fmt.Sprintf("layers.%d.", i), true)
	}
	return e
}

// zimageBucket assigns a Z-Image key (either naming) to a report bucket.
func zimageBucket(name string) string {
	switch {
	case strings.HasPrefix(name, "all_x_embedder."), strings.HasPrefix(name, "x_embedder."),
		strings.HasPrefix(name, "t_embedder."), strings.HasPrefix(name, "cap_embedder."),
		name == "x_pad_token", name == "cap_pad_token":
		return BucketEmbedders
	case strings.HasPrefix(name, "layers."), strings.HasPrefix(name, "noise_refiner."), strings.HasPrefix(name, "context_refiner."):
		return BucketBlocks
	case strings.HasPrefix(name, "all_final_layer."), strings.HasPrefix(name, "final_layer."):
		return BucketFinalLayer
	}
	return BucketOther
}

package arch

import (
	"fmt"
	"strings"
)

// KeyKind says how one tensor of a model's canonical naming relates to the
// tensors of another naming.
type KeyKind int

// The relations the DiT and Z-Image namings need.
const (
	// Renamed: the other naming holds the same tensor under Others[0].
	Renamed KeyKind = iota
	// Fused: the canonical tensor is the row-wise concatenation of Others
	// (a fused qkv = [to_q; to_k; to_v]).
	Fused
	// Replicated: the other naming holds one identical copy per block,
	// Others[i] being block i's (DiT's timestep and class embedders in
	// diffusers).
	Replicated
)

// KeyMap maps one tensor of the canonical naming (DiT original, Z-Image
// ComfyUI without prefix) to the tensors of the diffusers naming.
type KeyMap struct {
	Name   string
	Kind   KeyKind
	Others []string
}

// DiTDiffusersKeys maps every original-naming DiT tensor except pos_embed
// (a fixed table that diffusers computes and does not store) to its
// diffusers form: renames, timm's fused qkv (rows [q; k; v]) split into
// to_q/to_k/to_v, and the shared embedders copied into every block.
func DiTDiffusersKeys(c *DiTConfig) []KeyMap {
	var out []KeyMap
	rename := func(orig, diff string) { out = append(out, KeyMap{orig, Renamed, []string{diff}}) }
	for _, kind := range []string{"weight", "bias"} {
		rename("x_embedder.proj."+kind, "pos_embed.proj."+kind)
	}
	embedders := [][2]string{
		{"t_embedder.mlp.0.weight", "norm1.emb.timestep_embedder.linear_1.weight"},
		{"t_embedder.mlp.0.bias", "norm1.emb.timestep_embedder.linear_1.bias"},
		{"t_embedder.mlp.2.weight", "norm1.emb.timestep_embedder.linear_2.weight"},
		{"t_embedder.mlp.2.bias", "norm1.emb.timestep_embedder.linear_2.bias"},
		{"y_embedder.embedding_table.weight", "norm1.emb.class_embedder.embedding_table.weight"},
	}
	for _, e := range embedders {
		copies := make([]string, c.Depth)
		for i := range copies {
			copies[i] = fmt.Sprintf("transformer_blocks.%d.%s", i, e[1])
		}
		out = append(out, KeyMap{e[0], Replicated, copies})
	}
	blockRenames := [][2]string{
		{"adaLN_modulation.1", "norm1.linear"},
		{"attn.proj", "attn1.to_out.0"},
		{"mlp.fc1", "ff.net.0.proj"},
		{"mlp.fc2", "ff.net.2"},
	}
	for i := 0; i < c.Depth; i++ {
		b, d := fmt.Sprintf("blocks.%d.", i), fmt.Sprintf("transformer_blocks.%d.", i)
		for _, kind := range []string{"weight", "bias"} {
			out = append(out, KeyMap{b + "attn.qkv." + kind, Fused, []string{
				d + "attn1.to_q." + kind, d + "attn1.to_k." + kind, d + "attn1.to_v." + kind}})
			for _, r := range blockRenames {
				rename(b+r[0]+"."+kind, d+r[1]+"."+kind)
			}
		}
	}
	for _, kind := range []string{"weight", "bias"} {
		rename("final_layer.adaLN_modulation.1."+kind, "proj_out_1."+kind)
		rename("final_layer.linear."+kind, "proj_out_2."+kind)
	}
	return out
}

// ZImageDiffusersKey maps one Z-Image tensor in the ComfyUI naming
// (without its model.diffusion_model. prefix) to its diffusers/Tongyi form:
// the embedder and final layer gain the patch key (all_x_embedder.2-1.),
// the fused attention.qkv splits into to_q/to_k/to_v, and the attention
// output and q/k norms are renamed. Every other name is the same in both.
func ZImageDiffusersKey(name string, c *ZImageConfig) KeyMap {
	if rest, ok := strings.CutPrefix(name, "x_embedder."); ok {
		return KeyMap{name, Renamed, []string{"all_x_embedder." + c.PatchKey() + "." + rest}}
	}
	if rest, ok := strings.CutPrefix(name, "final_layer."); ok {
		return KeyMap{name, Renamed, []string{"all_final_layer." + c.PatchKey() + "." + rest}}
	}
	if block, ok := strings.CutSuffix(name, ".attention.qkv.weight"); ok {
		return KeyMap{name, Fused, []string{block + ".attention.to_q.weight", block + ".attention.to_k.weight", block + ".attention.to_v.weight"}}
	}
	renames := [...][2]string{
		{".attention.out.weight", ".attention.to_out.0.weight"},
		{".attention.q_norm.weight", ".attention.norm_q.weight"},
		{".attention.k_norm.weight", ".attention.norm_k.weight"},
	}
	for _, r := range renames {
		if block, ok := strings.CutSuffix(name, r[0]); ok {
			return KeyMap{name, Renamed, []string{block + r[1]}}
		}
	}
	return KeyMap{name, Renamed, []string{name}}
}

// ZImageDiffusersKeys maps every tensor of a Z-Image transformer in the
// ComfyUI naming to its diffusers/Tongyi form (see ZImageDiffusersKey).
func ZImageDiffusersKeys(c *ZImageConfig) []KeyMap {
	names := ExpectedZImage(c, Comfy).Names()
	out := make([]KeyMap, len(names))
	for i, n := range names {
		out[i] = ZImageDiffusersKey(n, c)
	}
	return out
}

// ComfyPrefix is the prefix ComfyUI full checkpoints put before the
// denoiser's tensor names.
const ComfyPrefix = comfyPrefix

// DiTDiffusersConfig is the config.json of diffusers' DiTTransformer2DModel
// for c (the form a diffusers model folder carries beside its weights).
func DiTDiffusersConfig(c *DiTConfig) map[string]any {
	return map[string]any{
		"_class_name": "DiTTransformer2DModel", "num_attention_heads": c.NumHeads,
		"attention_head_dim": c.HiddenSize / max(c.NumHeads, 1), "in_channels": c.InChannels, "out_channels": c.OutChannels(),
		"num_layers": c.Depth, "sample_size": c.InputSize, "patch_size": c.PatchSize, "attention_bias": true,
		"activation_fn": "gelu-approximate", "num_embeds_ada_norm": 1000, "norm_type": "ada_norm_zero",
		"norm_elementwise_affine": false, "norm_eps": 1e-5,
	}
}

// ZImageDiffusersConfig is the config.json of ZImageTransformer2DModel for c;
// a padding multiple other than the reference's is written as
// seq_multi_of, a key of ours (diffusers ignores it, and pads to 32).
func ZImageDiffusersConfig(c *ZImageConfig) map[string]any {
	m := map[string]any{
		"_class_name": "ZImageTransformer2DModel", "all_patch_size": []int{c.PatchSize}, "all_f_patch_size": []int{c.FPatchSize},
		"in_channels": c.InChannels, "dim": c.Dim, "n_layers": c.NLayers, "n_refiner_layers": c.NRefinerLayers,
		"n_heads": c.NHeads, "n_kv_heads": c.NKVHeads, "norm_eps": c.NormEps, "qk_norm": c.QKNorm,
		"cap_feat_dim": c.CapFeatDim, "rope_theta": c.RopeTheta, "t_scale": c.TScale,
		"axes_dims": c.AxesDims, "axes_lens": c.AxesLens,
	}
	if c.SeqMultiOf > 0 && c.SeqMultiOf != DefaultSeqMultiOf {
		m["seq_multi_of"] = c.SeqMultiOf
	}
	return m
}

// Command sparserepo writes a header-only Z-Image-Turbo repository at full
// size — transformer/ (6.15 B parameters), text_encoder/ (Qwen3-4B), vae/
// (FLUX.1's AutoencoderKL), all BF16, with real headers and configs and
// their data left as holes (zeros that take no disk space) — plus a copy
// of a real tokenizer/, so that `dcdit sample REPO --prompt …` can be
// measured end to end (time and resident memory of each phase) without the
// weights.
//
//	go run ./internal/cmd/sparserepo -tokenizer ../shared/fixtures/qwen3-tokenizer -out /tmp/zimage-turbo
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/vae"
)

// shard is the largest shard, as the published repository splits its files.
const shard = 5_000_000_000

// qwen3_4B is the Z-Image text encoder's configuration (transformers'
// Qwen3Config keys).
var qwen3_4B = map[string]any{
	"model_type": "qwen3", "architectures": []string{"Qwen3ForCausalLM"}, "vocab_size": 151936, "hidden_size": 2560,
	"intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
	"head_dim": 128, "rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu",
	"max_position_embeddings": 40960, "torch_dtype": "bfloat16",
}

// fluxVAE is FLUX.1's AutoencoderKL configuration, the VAE of Z-Image.
var fluxVAE = vae.Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2,
	LatentChannels: 16, NormNumGroups: 32, MidBlockAddAttention: true, ScalingFactor: vae.FluxScalingFactor, ShiftFactor: vae.FluxShiftFactor}

func main() {
	out := flag.String("out", "", "folder to write the repository into (must not exist)")
	tok := flag.String("tokenizer", "", "a tokenizer/ folder to copy (tokenizer.json, tokenizer_config.json)")
	flag.Parse()
	if err := run(*out, *tok); err != nil {
		fmt.Fprintln(os.Stderr, "sparserepo:", err)
		os.Exit(1)
	}
}

func run(out, tok string) error {
	if out == "" || tok == "" {
		return fmt.Errorf("give -out and -tokenizer")
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists", out)
	}
	for _, sub := range []string{"transformer", "text_encoder", "vae", "tokenizer"} {
		if err := os.MkdirAll(filepath.Join(out, sub), 0o755); err != nil {
			return err
		}
	}
	zc := testckpt.ZImageTurbo()
	if _, err := testckpt.WriteSparseSharded(filepath.Join(out, "transformer"), "diffusion_pytorch_model", arch.ExpectedZImage(zc, arch.Diffusers), dtype.BF16, shard); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(out, "transformer", "config.json"), arch.ZImageDiffusersConfig(zc)); err != nil {
		return err
	}
	if _, err := testckpt.WriteSparseTensors(filepath.Join(out, "text_encoder"), "model", qwen3Tensors(), shard); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(out, "text_encoder", "config.json"), qwen3_4B); err != nil {
		return err
	}
	specs, err := vae.ExpectedTensors(&fluxVAE)
	if err != nil {
		return err
	}
	var vt []safetensors.WriteTensor
	for _, s := range specs {
		vt = append(vt, safetensors.WriteTensor{Name: s.Name, DType: dtype.BF16, Shape: s.Shape})
	}
	if _, err := testckpt.WriteSparseTensors(filepath.Join(out, "vae"), "diffusion_pytorch_model", vt, shard); err != nil {
		return err
	}
	cfg, err := fluxVAE.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "vae", "config.json"), cfg, 0o644); err != nil {
		return err
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tok, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "tokenizer", f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// qwen3Tensors lists Qwen3-4B's tensors as Qwen3ForCausalLM names them.
func qwen3Tensors() []safetensors.WriteTensor {
	v, d, in := int64(151936), int64(2560), int64(9728)
	q, kv := int64(32*128), int64(8*128)
	ts := []safetensors.WriteTensor{{Name: "model.embed_tokens.weight", Shape: []int64{v, d}}, {Name: "model.norm.weight", Shape: []int64{d}}}
	for l := range 36 {
		p := fmt.Sprintf("model.layers.%d.", l)
		ts = append(ts,
			safetensors.WriteTensor{Name: p + "input_layernorm.weight", Shape: []int64{d}},
			safetensors.WriteTensor{Name: p + "post_attention_layernorm.weight", Shape: []int64{d}},
			safetensors.WriteTensor{Name: p + "self_attn.q_proj.weight", Shape: []int64{q, d}},
			safetensors.WriteTensor{Name: p + "self_attn.k_proj.weight", Shape: []int64{kv, d}},
			safetensors.WriteTensor{Name: p + "self_attn.v_proj.weight", Shape: []int64{kv, d}},
			safetensors.WriteTensor{Name: p + "self_attn.o_proj.weight", Shape: []int64{d, q}},
			safetensors.WriteTensor{Name: p + "self_attn.q_norm.weight", Shape: []int64{128}},
			safetensors.WriteTensor{Name: p + "self_attn.k_norm.weight", Shape: []int64{128}},
			safetensors.WriteTensor{Name: p + "mlp.gate_proj.weight", Shape: []int64{in, d}},
			safetensors.WriteTensor{Name: p + "mlp.up_proj.weight", Shape: []int64{in, d}},
			safetensors.WriteTensor{Name: p + "mlp.down_proj.weight", Shape: []int64{d, in}},
		)
	}
	for i := range ts {
		ts[i].DType = dtype.BF16
	}
	return ts
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Package qwen3 is transformers' Qwen3Model, the text encoder of the
// Z-Image pipelines, as a CPU inference forward pass over the project's
// kernels.
//
// # Weights
//
// Open reads a text_encoder/ folder (config.json with model.safetensors
// or a sharded index), a pipeline folder holding text_encoder/, or a
// single safetensors file such as ComfyUI's qwen_3_4b.safetensors. Tensor
// names are Qwen3Model's, with or without the "model." prefix of a
// Qwen3ForCausalLM checkpoint; lm_head.weight (tied to the embeddings in
// Qwen3-4B) is ignored because the encoder never produces logits. Every
// expected tensor must be present with the shape the configuration
// implies and hold finite values. Without a config.json the configuration
// is read off the shapes (head_dim from q_norm, head counts from the q
// and k projections) and rope_theta and rms_norm_eps take Qwen3-4B's
// values, which Model.Warnings says.
//
// BF16 checkpoints stay BF16: the projection matrices and the embedding
// table are kept as bfloat16 bit patterns, so Qwen3-4B holds about 8 GB
// of weights instead of 16. A linear layer multiplies with
// gemm.GemmBF16, which widens the matrix to float32 inside the GEMM's
// packing, so arithmetic and accumulation stay float32, as transformers
// computes with BF16 weights widened to float32. Norm weights are widened at load (they are
// vectors). A forward pass takes its activations from scratch the model
// pools and reuses: with gigabytes of live weights the Go collector
// would otherwise let discarded activations grow to as much again before
// collecting them, so a 4B model stays near its 8 GB of weights however
// often it is called.
//
// # Forward
//
// Each prompt is its own sequence; positions restart at 0 for each. A
// decoder layer is x += o_proj(attn(RMSNorm(x))) then x +=
// down(silu(gate(h))·up(h)) with h = RMSNorm(x). Attention applies a
// per-head RMSNorm over head_dim to q and k (one weight shared by all
// heads), then rotate-half RoPE over head_dim with transformers' float32
// tables, then causal grouped-query attention (query head j reads
// key/value head j / (heads/kv_heads)) with a float32 softmax.
//
// hidden_states follows transformers: entry 0 is the embeddings, entry k
// the output of decoder layer k−1, and the last entry the final norm of
// the last layer's output. Z-Image conditions on hidden_states[-2], the
// un-normalised output of the second-to-last layer, cut to each prompt's
// real tokens: PromptEmbeds computes exactly that and skips the last
// layer, whose weights Z-Image never uses.
//
// Right padding: transformers masks a key when it lies after the query or
// is padding. A real token's row therefore does not depend on the padding
// or on the other prompts, and HiddenStates runs each prompt unpadded. A
// padding row attends to all of its prompt's real tokens;
// HiddenStatesPadded computes those rows too, for a batch given as
// transformers takes it (input_ids and attention_mask).
package qwen3

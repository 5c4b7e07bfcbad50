// Package convert plans and executes streaming conversions of checkpoints
// between layouts, dtypes and shardings.
//
// A conversion is two steps. Plan looks at tensor names, shapes and dtypes
// only (a header read) and lists every output tensor with the input
// tensors it is made of and how: renamed, split from a fused qkv, fused
// into one, replicated into every block, de-duplicated from per-block
// copies, recomputed (DiT's fixed position table), cast between F32, BF16
// and F16. Every input tensor must be consumed or explicitly dropped, so a
// conversion never loses a tensor silently. Execute then writes the plan
// tensor by tensor, reading each source with pread and never holding more
// than a few buffers, into one safetensors file or a folder of shards with
// an index and config.json, atomically: a failure leaves nothing at the
// output path.
//
// Supported: DiT original ↔ diffusers; Z-Image diffusers/Tongyi ↔ ComfyUI
// (with or without the model.diffusion_model. prefix); any of these to its
// own layout (a dtype cast, resharding, or .pt → safetensors). DC
// checkpoints convert whole to and from the official DC-DiT's files in
// package dc/hnet/official.
package convert

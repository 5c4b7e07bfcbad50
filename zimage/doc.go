// Package zimage is the Z-Image backbone (Tongyi-MAI ZImageTransformer2DModel)
// on dcdit's ops, with its flow-matching sampler in diffusion/flowmatch.
//
// # Weights
//
// Load reads a transformer checkpoint in the diffusers/Tongyi naming or in
// ComfyUI's (fused attention.qkv, attention.out, q_norm/k_norm, x_embedder,
// final_layer, optionally under "model.diffusion_model.") into one internal
// layout, ComfyUI's names without the prefix: a fused qkv is the
// [q | k | v] matrix ops.Attention reads. The configuration comes from the
// tensors' shapes, completed by a config.json (LoadOptions.Config, or the
// model folder's own) for what shapes cannot tell: axes_dims, rope_theta,
// t_scale, and the head count when there are no q/k norms.
//
// For inference, LoadModel with LoadOptions.KeepBF16 keeps a BF16
// checkpoint's Linear weights as bfloat16, outside the parameter arena
// (6.15 B parameters: 12.3 GB where float32 takes 24.6 GB); the forward
// pass reads them through ops.LinearBF16, which widens them inside the
// GEMM's packing, so its outputs are those of the model loaded in float32,
// bit for bit. Such a model cannot be trained or saved.
//
// # Streams
//
// The reference model pads every item's image and caption sequences to a
// multiple of SeqMultiOf with learned pad tokens (which attend and are
// attended), then batch-pads the items to one length and masks the batch
// padding out of the keys. Here the items are packed instead (Layout): the
// image stream, the caption stream and the unified stream ([image ;
// caption] per item) concatenate the items' padded sequences and attention
// stays within each item (ops.Attention's offsets), which is the
// reference's computation on every row it uses. Each row carries its
// position ids as real numbers: rotary factors (Rope) are evaluated at any
// position, so that tokens may sit between grid points.
//
// # Forward
//
// Run, on a Prepare'd batch: Timestep (t·t_scale, sinusoid, MLP) gives
// adaln_input; EmbedImage and EmbedCaption embed the real tokens and fill
// the pad rows; NoiseRefiner (modulated blocks) runs over the image stream,
// ContextRefiner (unmodulated) over the caption stream; Unify joins them;
// Layers runs the main blocks; FinalLayer maps the real image tokens to
// patches, and Images unpatchifies them. A block is Z-Image's sandwich:
// x += tanh(gate)·RMSNorm(sublayer(RMSNorm(x)·(1 + scale))) for attention
// (per-head RMSNorm of q and k, then RoPE) and the SwiGLU feed-forward; the
// context refiner's blocks have neither scale nor gate. Every step is a
// differentiable op, so ops.Backward gives gradients through all of it.
//
// The model time t is 1 − σ (0 at pure noise) and the output is the
// velocity x0 − ε; diffusion/flowmatch holds the schedule and sampler.
//
// # As a DC backbone
//
// Backbone is the model as the DC scaffold's dc.Backbone: Condition gives
// the adaLN input (the scaffold's conditioning vector) and each sample's
// caption stream after the context refiner; Forward lays the kept image
// tokens out as an image stream (padded with x_pad_token, RoPE at their
// real-valued positions on the patch grid, the first axis after the
// caption as the reference places a frame), runs the noise refiner,
// unifies with the captions and runs the main layers, and returns the
// image tokens' hidden states. With every token kept at its patch centre
// and the model's own patch embedding as the tokens, that is Run's
// computation before the final layer, exactly.
package zimage

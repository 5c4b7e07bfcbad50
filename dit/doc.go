// Package dit is the DiT backbone (facebookresearch/DiT) on dcdit's
// kernels: patch and position embeddings, adaLN-Zero blocks over packed
// tokens and the final layer. Its diffusion process is in diffusion/ddpm.
package dit

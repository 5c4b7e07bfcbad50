// Package dit is the DiT backbone (facebookresearch/DiT) on dcdit's
// kernels: patch and position embeddings, the adaLN-Zero blocks over
// packed tokens and the embedders (package adaln, which DC-DiT's main
// network shares) and the final layer. Its diffusion process is in
// diffusion/ddpm.
package dit

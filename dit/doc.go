// Package dit is the DiT backbone (facebookresearch/DiT) on dcdit's kernels:
// patch and position embeddings, adaLN-Zero blocks over packed tokens, the
// final layer, and the DDPM process it was trained with.
package dit

// Package zimage is the Z-Image backbone (Tongyi-MAI ZImageTransformer2DModel)
// on dcdit's kernels, with its flow-matching sampler.
package zimage

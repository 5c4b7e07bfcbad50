// Package kernels holds dcdit's numerical kernels as plain functions over
// row-major slices: forward and backward passes with no autograd, no
// allocation in steady state (scratch space is passed in), parallel over
// cores through kernels/parallel. Package ops wraps them as spago autograd
// functions.
//
// Conventions shared by every kernel:
//   - Matrices are row-major []T with explicit dimensions; tokens are rows
//     and features are columns ("token-major").
//   - T is float32 (the working precision) or float64 (gradient checks and
//     references); both instantiations run the same code.
//   - Packed variable-length sequences are described by offsets of length
//     S+1: sequence s owns rows offsets[s] ≤ r < offsets[s+1]. Per-sample
//     vectors (modulation, gates) use the same offsets.
//   - Backward kernels overwrite their gradient outputs (they do not
//     accumulate); a nil gradient output means "not needed" and is skipped.
//   - Inconsistent dimensions panic with a "kernels: ..." message: they are
//     caller bugs, not input errors.
package kernels

// Package optim updates a model's parameters during training: AdamW,
// global-norm gradient clipping and an exponential moving average of the
// weights, with parameter freezing shared by all three.
//
// Everything works over flat float32 buffers: a model's parameters live in
// one contiguous []float32 (each tensor is a view into it) and so do its
// gradients, so one optimiser step is a few passes over a few long slices
// rather than thousands of small per-tensor calls. A Range names a part of
// such a buffer; a Mask says which parts are trainable; a Group gives some
// ranges their own hyperparameters, like a PyTorch param group.
//
// The arithmetic is float32, operation for operation as PyTorch does it for
// float32 parameters, so results stay within float32 rounding of PyTorch's.
// Passes run on all cores (kernels/parallel) over AVX-512 or AVX2 assembly
// chosen at start-up; setting DCDIT_KERNELS=generic forces the pure-Go
// loops, which compute bit-for-bit the same AdamW and EMA updates. Steps do
// not allocate.
package optim

// Package integration holds the GPU stack's integration tests, whole
// models against the CPU: a DiT and a DC-DiT run forward and backward with
// their parameters on the device (a device.Arena) through the same model
// code as on the CPU, and one optimiser step, each compared with the CPU;
// a DiT training stage on the device, resumed; and the times of DiT-XL/2
// and DC-DiT-XL passes. Every GPU test skips without a CUDA device; the
// comparison they share is checked on the CPU. The package has no code of
// its own: its tests import the models, the trainer and the device
// packages together, which no package below them may.
package integration

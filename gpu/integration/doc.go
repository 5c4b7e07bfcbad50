// Package gpucheck holds the GPU checks of whole models (issue 16): a
// DiT and a DC-DiT run forward and backward with their parameters on the
// device (package ops/device/arena) through the same model code as on the
// CPU, and one AdamW step, each compared with the CPU; and the time of a
// DiT-XL/2 forward pass. Every test skips without a CUDA device. The
// package has no code of its own: it exists for its tests, which import
// the models and the device packages together.
package integration

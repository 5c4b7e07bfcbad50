package testckpt

import (
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// WriteSparseFile writes the tensors of exp as one safetensors file at path
// whose header is real and whose data is a hole (zeros that take almost no
// disk space), for header-only work at full model scale.
func WriteSparseFile(path string, exp arch.Expected, dt dtype.DType) error {
	tensors := make([]safetensors.WriteTensor, len(exp))
	for i, name := range exp.Names() {
		tensors[i] = safetensors.WriteTensor{Name: name, DType: dt, Shape: exp.Shape(i)}
	}
	return writeSparse(path, tensors)
}

// DiTPreset returns the configuration of a standard DiT size ("DiT-XL/2")
// at latent side inputSize with learned sigma and 1000 classes, as the
// released checkpoints have; ok is false for an unknown name.
func DiTPreset(name string, inputSize int) (c *arch.DiTConfig, ok bool) {
	p, ok := arch.LookupDiTPreset(name)
	if !ok {
		return nil, false
	}
	return &arch.DiTConfig{Depth: p.Depth, HiddenSize: p.Hidden, NumHeads: p.NumHeads, PatchSize: p.Patch,
		InChannels: 4, InputSize: inputSize, LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256,
		Preset: p.Name}, true
}

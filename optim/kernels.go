package optim

import (
	"math"
	"os"
)

// AdamWScalars are the per-step float32 constants of one group's AdamW
// update, in the layout the assembly kernels read (offsets 0, 4, ..., 28)
// and the CUDA kernel takes (gpu/cudakernels):
//
//	p = p·Decay
//	m = Beta1·m + C1·g
//	v = Beta2·v + (C2·g)·g
//	p = p + (NegStep·m) / (√v / SqrtBc2 + Eps)
type AdamWScalars struct {
	Decay   float32 // 1 − lr·weight_decay
	Beta1   float32
	C1      float32 // 1 − β1
	Beta2   float32
	C2      float32 // 1 − β2
	SqrtBc2 float32 // √(1 − β2^t)
	Eps     float32
	NegStep float32 // −lr / (1 − β1^t)
}

// NewAdamWScalars returns the constants of step t (1 for the first step)
// with hyperparameters h. Python computes them in double precision and
// the tensor ops round each to float32; so do we.
func NewAdamWScalars(h Hyper, t int64) AdamWScalars {
	ft := float64(t)
	return AdamWScalars{
		Decay:   float32(1 - h.LR*h.WeightDecay),
		Beta1:   float32(h.Beta1),
		C1:      float32(1 - h.Beta1),
		Beta2:   float32(h.Beta2),
		C2:      float32(1 - h.Beta2),
		SqrtBc2: float32(math.Sqrt(1 - math.Pow(h.Beta2, ft))),
		Eps:     float32(h.Eps),
		NegStep: float32(-(h.LR / (1 - math.Pow(h.Beta1, ft)))),
	}
}

// kernelSet is one implementation of the element loops. The assembly sets
// handle whole vectors and leave any tail to the generic loops, which
// compute the same bits for AdamW, EMA and scaling.
type kernelSet struct {
	name       string
	adamw      func(p, g, m, v []float32, k *AdamWScalars)
	ema        func(e, p []float32, decay, rest float32)
	scale      func(x []float32, s float32)
	sumSquares func(x []float32) float64
}

var genericKernels = kernelSet{
	name:       "generic",
	adamw:      adamwGeneric,
	ema:        emaGeneric,
	scale:      scaleGeneric,
	sumSquares: sumSquaresGeneric,
}

// kernelSets lists the implementations this machine can run, slowest first;
// platform files append to it in init.
var kernelSets = []*kernelSet{&genericKernels}

// active is the set every optimiser uses; see selectKernels.
var active = &genericKernels

// KernelsEnv is the environment variable that overrides the choice of
// kernels: "generic" forces the pure-Go loops; the name of another set
// ("avx2", "avx512") selects it when the CPU has it.
const KernelsEnv = "DCDIT_KERNELS"

// selectKernels picks the fastest available set unless KernelsEnv names
// another available one.
func selectKernels() {
	active = kernelSets[len(kernelSets)-1]
	want := os.Getenv(KernelsEnv)
	for _, k := range kernelSets {
		if k.name == want {
			active = k
		}
	}
}

// Kernels names the element loops in use: "avx512", "avx2" or "generic".
func Kernels() string { return active.name }

// The generic loops are the definitions. Every product and quotient is
// wrapped in float32(...) because the Go spec lets the compiler fuse x*y+z
// otherwise, and the assembly, like PyTorch's float32 ops, rounds each
// operation separately.

// adamwGeneric is PyTorch's AdamW update for one element, in its order:
//
//	p = p·decay
//	m = β1·m + (1−β1)·g
//	v = β2·v + ((1−β2)·g)·g
//	p = p + (−step·m) / (√v / √(1−β2^t) + eps)
func adamwGeneric(p, g, m, v []float32, k *AdamWScalars) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	for i := range p {
		gi := g[i]
		mi := float32(k.Beta1*m[i]) + float32(k.C1*gi)
		vi := float32(k.Beta2*v[i]) + float32(float32(k.C2*gi)*gi)
		m[i], v[i] = mi, vi
		d := float32(float32(math.Sqrt(float64(vi)))/k.SqrtBc2) + k.Eps
		p[i] = float32(p[i]*k.Decay) + float32(float32(k.NegStep*mi)/d)
	}
}

// emaGeneric is e = decay·e + rest·p, with rest = 1 − decay rounded once.
func emaGeneric(e, p []float32, decay, rest float32) {
	p = p[:len(e)]
	for i := range e {
		e[i] = float32(e[i]*decay) + float32(rest*p[i])
	}
}

func scaleGeneric(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// sumSquaresGeneric accumulates in float64 with eight running sums, which
// keeps the sum accurate over tens of millions of terms and lets the CPU
// overlap the additions.
func sumSquaresGeneric(x []float32) float64 {
	var s [8]float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		for j := range s {
			f := float64(v[j])
			s[j] += f * f
		}
	}
	for ; i < len(x); i++ {
		f := float64(x[i])
		s[0] += f * f
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

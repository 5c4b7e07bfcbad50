package optim

import (
	"math/rand/v2"
	"testing"
)

// benchParams is the size torch_reference.py times AdamW at (its case
// "adamw"), about DiT-S/2 with its scaffold.
const benchParams = 33_000_000

func benchBuffers(b *testing.B) (p, g []float32) {
	r := rand.New(rand.NewPCG(1, 1))
	return randn(r, benchParams, 1), randn(r, benchParams, 0.01)
}

// eachKernelsBench runs f once per kernel set, the active one first.
func eachKernelsBench(b *testing.B, f func(b *testing.B)) {
	for _, k := range kernelSets {
		b.Run(k.name, func(b *testing.B) {
			useKernels(b, k)
			f(b)
		})
	}
}

func reportPerParam(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchParams, "ns/param")
}

func BenchmarkAdamW(b *testing.B) {
	p, g := benchBuffers(b)
	eachKernelsBench(b, func(b *testing.B) {
		o, err := NewAdamW(AllTrainable(benchParams), DefaultHyper())
		if err != nil {
			b.Fatal(err)
		}
		o.Step(p, g) // fault the state pages in
		b.SetBytes(28 * benchParams)
		b.ResetTimer()
		for b.Loop() {
			o.Step(p, g)
		}
		reportPerParam(b)
	})
}

func BenchmarkEMA(b *testing.B) {
	p, _ := benchBuffers(b)
	eachKernelsBench(b, func(b *testing.B) {
		e, _ := NewEMA(AllTrainable(benchParams), p, 0.9999)
		b.SetBytes(12 * benchParams)
		for b.Loop() {
			e.Update(p)
		}
		reportPerParam(b)
	})
}

func BenchmarkClip(b *testing.B) {
	_, g := benchBuffers(b)
	eachKernelsBench(b, func(b *testing.B) {
		// A max norm below the norm, so every call also scales.
		c := NewGradClipper(AllTrainable(benchParams), 1e-30)
		b.SetBytes(12 * benchParams)
		for b.Loop() {
			if _, err := c.Clip(g); err != nil {
				b.Fatal(err)
			}
		}
		reportPerParam(b)
	})
}

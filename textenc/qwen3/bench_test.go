package qwen3

import (
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// loop runs f b.N times and reports the throughput in tokens per second
// of wall time and per CPU-second (the steadier figure on a shared
// machine).
func loop(b *testing.B, tokens int, f func()) {
	cpu := cpuSeconds()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
	if used := cpuSeconds() - cpu; used > 0 {
		b.ReportMetric(float64(tokens*b.N)/used, "tokens/cpu-s")
	}
}

// BenchmarkForwardTiny runs every hidden state of the fixture's prompts
// (unpadded) at the fixture's size, with float32 and with BF16 weights.
func BenchmarkForwardTiny(b *testing.B) {
	root, err := fixtures.Root()
	if err != nil {
		b.Fatal(err)
	}
	cases, err := fixtures.Discover(root, kind)
	if err != nil || len(cases) == 0 {
		b.Fatalf("no %s fixture under %s: %v", kind, root, err)
	}
	c := cases[0]
	ids, masks := fixturePrompts(b, c.Open(b, "io.safetensors"))
	tokens := 0
	for p := range ids {
		n, err := realTokens(masks[p], len(ids[p]))
		if err != nil {
			b.Fatal(err)
		}
		ids[p] = ids[p][:n]
		tokens += n
	}
	for _, w := range []struct{ name, file string }{{"f32", "weights.safetensors"}, {"bf16", "weights-bf16.safetensors"}} {
		b.Run(w.name, func(b *testing.B) {
			m := fixtureModel(b, c, w.file)
			loop(b, tokens, func() {
				if _, err := m.HiddenStates(ids); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// layer4B is one decoder layer of Qwen3-4B (the vocabulary is cut: the
// embedding lookup is not what is measured).
var layer4B = Config{
	VocabSize: 1024, HiddenSize: 2560, IntermediateSize: 9728, NumHiddenLayers: 1,
	NumAttentionHeads: 32, NumKeyValueHeads: 8, HeadDim: 128, RopeTheta: 1e6, RMSNormEps: 1e-6,
}

// BenchmarkLayer4B runs one Qwen3-4B-shaped decoder layer over a
// 128-token prompt with random float32 weights and with BF16 weights
// (widened inside the GEMM's packing).
func BenchmarkLayer4B(b *testing.B) {
	const tokens = 128
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, tokens)
	for i := range ids {
		ids[i] = rng.IntN(layer4B.VocabSize)
	}
	for _, bf16 := range []bool{false, true} {
		name := "f32"
		if bf16 {
			name = "bf16"
		}
		b.Run(name, func(b *testing.B) {
			m := randomModel(layer4B, bf16, 9)
			batch, err := m.newBatch([][]int{ids}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(m.WeightBytes())/(1<<20), "weightMiB")
			loop(b, tokens, func() { m.forward(batch, 1, func(int, []float32) {}, nil) })
		})
	}
}

package qwen3

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// randomMatrix is a [rows, cols] Linear weight with N(0, 1/cols) entries,
// rounded to BF16 when bf16 is set.
func randomMatrix(rng *rand.Rand, rows, cols int, std float64, bf16 bool) matrix {
	w := matrix{rows: rows, cols: cols}
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * std)
	}
	if !bf16 {
		w.f32 = v
		return w
	}
	w.bf16 = make([]uint16, len(v))
	for i, x := range v {
		w.bf16[i] = dtype.Float32ToBF16(x)
	}
	return w
}

func randomVector(rng *rand.Rand, n int, mean, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + rng.NormFloat64()*std)
	}
	return v
}

// randomModel draws a model of configuration c the way the fixture does:
// embeddings N(0, 1), Linear weights N(0, 1/fan_in), norm weights near 1.
func randomModel(c Config, bf16 bool, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 1))
	D, I, hd := c.HiddenSize, c.IntermediateSize, c.HeadDim
	qw, kvw := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	m := &Model{Config: c, embed: randomMatrix(rng, c.VocabSize, D, 1, bf16), norm: randomVector(rng, D, 1, 0.2)}
	for range c.NumHiddenLayers {
		in := 1 / math.Sqrt(float64(D))
		m.layers = append(m.layers, layer{
			inNorm: randomVector(rng, D, 1, 0.2), postNorm: randomVector(rng, D, 1, 0.2),
			qNorm: randomVector(rng, hd, 1.2, 0.3), kNorm: randomVector(rng, hd, 1.2, 0.3),
			q: randomMatrix(rng, qw, D, in, bf16), k: randomMatrix(rng, kvw, D, in, bf16), v: randomMatrix(rng, kvw, D, in, bf16),
			o:    randomMatrix(rng, D, qw, 1/math.Sqrt(float64(qw)), bf16),
			gate: randomMatrix(rng, I, D, in, bf16), up: randomMatrix(rng, I, D, in, bf16),
			down: randomMatrix(rng, D, I, 1/math.Sqrt(float64(I)), bf16),
		})
	}
	return m
}

// widened is m with every BF16 matrix converted to float32.
func widened(m *Model) *Model {
	w := &Model{Config: m.Config, norm: m.norm}
	conv := func(x matrix) matrix {
		if x.bf16 == nil {
			return x
		}
		y := matrix{rows: x.rows, cols: x.cols, f32: make([]float32, len(x.bf16))}
		widen(y.f32, x.bf16)
		return y
	}
	w.embed = conv(m.embed)
	w.layers = slices.Clone(m.layers)
	for i := range w.layers {
		for _, x := range w.layers[i].matrices() {
			*x = conv(*x)
		}
	}
	return w
}

var smallConfig = Config{
	VocabSize: 97, HiddenSize: 24, IntermediateSize: 40, NumHiddenLayers: 3,
	NumAttentionHeads: 6, NumKeyValueHeads: 2, HeadDim: 10, RopeTheta: 1e4, RMSNormEps: 1e-6,
}

// A BF16 matrix multiplies as its float32 widening does, bit for bit.
func TestMulBF16(t *testing.T) {
	tests := []struct{ rows, cols, n int }{
		{1, 5, 1}, {64, 33, 7}, {65, 20, 3}, {785, 48, 130}, {200, 1, 2}, {1024, 3, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d_n%d", tt.rows, tt.cols, tt.n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tt.rows), uint64(tt.cols)))
			w := randomMatrix(rng, tt.rows, tt.cols, 1, true)
			f := matrix{rows: tt.rows, cols: tt.cols, f32: make([]float32, tt.rows*tt.cols)}
			widen(f.f32, w.bf16)
			x := randomVector(rng, tt.n*tt.cols, 0, 1)
			got, want := make([]float32, tt.n*tt.rows), make([]float32, tt.n*tt.rows)
			w.mul(got, x, tt.n)
			f.mul(want, x, tt.n)
			if err := fixtures.AbsErr(got, want); !fixtures.Within(err, 0) {
				t.Errorf("differs from the widened matrix by %.3g", err)
			}
		})
	}
}

// attendNaive is the reference's masked attention in float64: scores
// everywhere, finfo.min-style masking by exclusion, softmax, sum.
func attendNaive(q, k, v []float32, b *batch, H, KV, hd int, scale float64) (out, probs []float64) {
	out = make([]float64, len(q))
	for s := 0; s+1 < len(b.offsets); s++ {
		r0, l := b.offsets[s], b.offsets[s+1]-b.offsets[s]
		for h := range H {
			g := h / (H / KV)
			for i := range l {
				p := make([]float64, l)
				m := math.Inf(-1)
				for j := range l {
					if j > i || j >= b.realLen[s] {
						continue
					}
					var dot float64
					for d := range hd {
						dot += float64(q[(r0+i)*H*hd+h*hd+d]) * float64(k[(r0+j)*KV*hd+g*hd+d])
					}
					p[j] = dot * scale
					m = max(m, p[j])
				}
				var sum float64
				for j := range l {
					if j > i || j >= b.realLen[s] {
						p[j] = 0
						continue
					}
					p[j] = math.Exp(p[j] - m)
					sum += p[j]
				}
				for j := range l {
					p[j] /= sum
					for d := range hd {
						out[(r0+i)*H*hd+h*hd+d] += p[j] * float64(v[(r0+j)*KV*hd+g*hd+d])
					}
				}
				probs = append(probs, p...)
			}
		}
	}
	return out, probs
}

// Attention matches the masked reference over sequences longer than a
// band, with and without padding rows, for every head grouping.
func TestAttend(t *testing.T) {
	tests := []struct {
		name       string
		H, KV, hd  int
		lens, real []int
	}{
		{"padded, several bands", 4, 2, 8, []int{2*attnBand + 22, attnBand + 6, 1}, []int{attnBand + 36, attnBand + 6, 1}},
		{"multi-query", 3, 1, 6, []int{attnBand + 1}, []int{attnBand - 1}},
		{"one key per row", 2, 2, 4, []int{attnBand + 3}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tt.H)))
			b := &batch{offsets: []int{0}, realLen: tt.real}
			for _, l := range tt.lens {
				b.offsets = append(b.offsets, b.offsets[len(b.offsets)-1]+l)
			}
			N := b.rows()
			q := randomVector(rng, N*tt.H*tt.hd, 0, 1.5)
			k := randomVector(rng, N*tt.KV*tt.hd, 0, 1.5)
			v := randomVector(rng, N*tt.KV*tt.hd, 0, 1)
			nProbs := 0
			for _, l := range tt.lens {
				nProbs += tt.H * l * l
			}
			out, probs := make([]float32, N*tt.H*tt.hd), make([]float32, nProbs)
			scale := 1 / math.Sqrt(float64(tt.hd))
			attend(out, q, k, v, b, tt.H, tt.KV, tt.hd, float32(scale), make([]float32, attnScratch(len(tt.lens)*tt.H, b.longest())), probs)
			wantOut, wantProbs := attendNaive(q, k, v, b, tt.H, tt.KV, tt.hd, scale)
			if err := fixtures.RelErr(f64(out), wantOut); !fixtures.Within(err, 1e-5) {
				t.Errorf("output: relative error %.3g", err)
			}
			if err := fixtures.AbsErr(f64(probs), wantProbs); !fixtures.Within(err, 1e-6) {
				t.Errorf("probabilities: absolute error %.3g", err)
			}
			for i, p := range wantProbs {
				if p == 0 && probs[i] != 0 {
					t.Fatalf("probability %d of a masked key is %g, want exactly 0", i, probs[i])
				}
			}
		})
	}
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// The real rows of a padded batch are each prompt's unpadded hidden
// states (up to summation order), PromptEmbeds is hidden_states[-2], and
// a BF16 model computes what its float32 widening does.
func TestForwardConsistency(t *testing.T) {
	m := randomModel(smallConfig, true, 3)
	rng := rand.New(rand.NewPCG(4, 4))
	lens := []int{5, attnBand + 9, 1, 30}
	L := slices.Max(lens) + 3
	var ids, padded, masks [][]int
	for _, n := range lens {
		row, pad, mask := make([]int, n), make([]int, L), make([]int, L)
		for i := range L {
			pad[i] = m.Config.VocabSize - 1
			if i < n {
				row[i] = rng.IntN(m.Config.VocabSize - 1)
				pad[i], mask[i] = row[i], 1
			}
		}
		ids, padded, masks = append(ids, row), append(padded, pad), append(masks, mask)
	}
	plain, err := m.HiddenStates(ids)
	if err != nil {
		t.Fatal(err)
	}
	pad, err := m.HiddenStatesPadded(padded, masks)
	if err != nil {
		t.Fatal(err)
	}
	wide, err := widened(m).HiddenStates(ids)
	if err != nil {
		t.Fatal(err)
	}
	embeds, err := m.PromptEmbeds(ids)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Config.NumHiddenLayers
	for k := range n + 1 {
		if err := fixtures.RelErr(plain.States[k], wide.States[k]); !fixtures.Within(err, 1e-6) {
			t.Errorf("state %d: BF16 against widened float32: relative error %.3g", k, err)
		}
		for p, l := range lens {
			got := pad.Prompt(k, p)[:l*m.Config.HiddenSize]
			if err := fixtures.RelErr(got, plain.Prompt(k, p)); !fixtures.Within(err, 1e-5) {
				t.Errorf("state %d, prompt %d: padded against unpadded: relative error %.3g", k, p, err)
			}
		}
	}
	for p := range lens {
		if !slices.Equal(embeds[p], plain.Prompt(n-1, p)) {
			t.Errorf("prompt %d: PromptEmbeds is not hidden_states[-2]", p)
		}
	}
}

// Bad inputs are refused with an error naming the prompt and the token.
func TestInputErrors(t *testing.T) {
	m := randomModel(smallConfig, false, 5)
	V := m.Config.VocabSize
	tests := []struct {
		name     string
		ids      [][]int
		masks    [][]int // nil: HiddenStates
		wantErrs []string
	}{
		{"no prompts", nil, nil, []string{"no prompts"}},
		{"empty prompt", [][]int{{1}, {}}, nil, []string{"prompt 1 has no tokens"}},
		{"id too large", [][]int{{1, V}}, nil, []string{"prompt 0: token 1 is id " + fmt.Sprint(V), "vocab_size " + fmt.Sprint(V)}},
		{"negative id", [][]int{{2}, {3, -1}}, nil, []string{"prompt 1: token 1 is id -1"}},
		{"mask count", [][]int{{1, 2}}, [][]int{}, []string{"0 attention masks for 1 prompts"}},
		{"mask length", [][]int{{1, 2}}, [][]int{{1}}, []string{"prompt 0: attention mask has 1 entries, want 2"}},
		{"left padding", [][]int{{1, 2, 3}}, [][]int{{0, 1, 1}}, []string{"entry 1 is 1 after padding"}},
		{"hole", [][]int{{1, 2, 3}}, [][]int{{1, 0, 1}}, []string{"entry 2 is 1 after padding"}},
		{"all padding", [][]int{{1, 2}}, [][]int{{0, 0}}, []string{"no real token"}},
		{"not a mask", [][]int{{1, 2}}, [][]int{{1, 2}}, []string{"entry 1 is 2, want 0 or 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.masks == nil {
				_, err = m.HiddenStates(tt.ids)
				if _, err2 := m.PromptEmbeds(tt.ids); (err == nil) != (err2 == nil) {
					t.Errorf("HiddenStates: %v, PromptEmbeds: %v", err, err2)
				}
			} else {
				_, err = m.HiddenStatesPadded(tt.ids, tt.masks)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, s := range append([]string{"qwen3: "}, tt.wantErrs...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

// Check names the field of an impossible configuration.
func TestConfigCheck(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"no heads", func(c *Config) { c.NumAttentionHeads = 0 }, "num_attention_heads 0, want ≥ 1"},
		{"groups", func(c *Config) { c.NumKeyValueHeads = 4 }, "num_attention_heads 6 is not a multiple of num_key_value_heads 4"},
		{"odd head", func(c *Config) { c.HeadDim = 9 }, "head_dim 9, want an even width"},
		{"NaN eps", func(c *Config) { c.RMSNormEps = math.NaN() }, "rms_norm_eps NaN"},
		{"NaN theta", func(c *Config) { c.RopeTheta = math.NaN() }, "rope_theta NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallConfig
			tt.edit(&c)
			err := c.Check()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}

// Repeated passes reuse their scratch: what a call allocates is about its
// output, not the activations of every layer.
func TestWorkspaceReused(t *testing.T) {
	c := smallConfig
	c.IntermediateSize = 512
	m := randomModel(c, true, 6)
	ids := [][]int{make([]int, 200), make([]int, 50)}
	if _, err := m.PromptEmbeds(ids); err != nil {
		t.Fatal(err)
	}
	const calls = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		if _, err := m.PromptEmbeds(ids); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perCall := int(after.TotalAlloc-before.TotalAlloc) / calls
	activations := 4 * 250 * c.IntermediateSize // one of the MLP's buffers
	if perCall >= activations {
		t.Errorf("a call allocates %d bytes, as much as an MLP activation (%d): scratch is not reused", perCall, activations)
	}
	t.Logf("%d bytes per call; output %d bytes", perCall, 4*250*c.HiddenSize)
}

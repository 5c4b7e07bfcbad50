package qwen3

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// Tolerances (the qwen3-tiny README): every float32 tensor within 5e-5
// max-abs relative error, ids and masks exact. The RoPE tables are held
// to 1e-6: a float64 evaluation of them differs from torch's float32 by
// ≤ 1.3e-7, and a wrong θ or width is far off.
const (
	forwardTol = 5e-5
	ropeTol    = 1e-6
	kind       = "qwen3-tiny"
)

// The inputs of both io files; every other tensor is computed.
var qwenInputs = []string{"input_ids", "attention_mask"}

// fixtureModel loads one of the case's weight files with its config.json.
func fixtureModel(t testing.TB, c fixtures.Case, weights string) *Model {
	t.Helper()
	m, err := OpenWith(filepath.Join(c.Dir, weights), Options{Config: c.Config})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fixturePrompts reads input_ids and attention_mask [B, L] as rows.
func fixturePrompts(t testing.TB, io *fixtures.File) (ids, masks [][]int) {
	t.Helper()
	shape := io.Shape("input_ids")
	if len(shape) != 2 {
		t.Fatalf("input_ids has shape %v, want [B, L]", shape)
	}
	B, L := int(shape[0]), int(shape[1])
	flat, mask := io.Ints("input_ids"), io.Ints("attention_mask")
	if len(mask) != B*L {
		t.Fatalf("attention_mask has %d values, want %d", len(mask), B*L)
	}
	for b := range B {
		ids = append(ids, flat[b*L:(b+1)*L])
		masks = append(masks, mask[b*L:(b+1)*L])
	}
	return ids, masks
}

// heads reorders packed rows [B·L, heads·hd] to the reference's
// [B, heads, L, hd].
func heads(x []float32, B, L, H, hd int) []float32 {
	out := make([]float32, len(x))
	for b := range B {
		for l := range L {
			for h := range H {
				copy(out[((b*H+h)*L+l)*hd:], x[(b*L+l)*H*hd+h*hd:(b*L+l)*H*hd+(h+1)*hd])
			}
		}
	}
	return out
}

// computeQwen runs the model from weights over the inputs of the case's
// io file and records every tensor that file holds: the padded batch's
// hidden states, and each prompt's embeddings from an unpadded run. With
// intermediates, it also records the mask, positions, RoPE tables and
// layer 0's intermediates (io.safetensors has them; io-bf16 does not).
func computeQwen(t testing.TB, c fixtures.Case, weights, ioName string, intermediates bool) *fixtures.Got {
	t.Helper()
	m := fixtureModel(t, c, weights)
	io := c.Open(t, ioName)
	ids, masks := fixturePrompts(t, io)
	B, L := len(ids), len(ids[0])
	b, err := m.newBatch(ids, masks)
	if err != nil {
		t.Fatal(err)
	}
	var tr *trace
	if intermediates {
		tr = &trace{}
	}
	out := m.hiddenStates(b, tr)
	got := fixtures.NewGot()
	n := m.Config.NumHiddenLayers
	for k := range n + 1 {
		got.F32(fmt.Sprintf("hidden_states.%d", k), out.States[k], forwardTol)
	}
	got.F32("last_hidden_state", out.States[n], forwardTol)

	real := make([][]int, B)
	for p := range B {
		real[p] = ids[p][:b.realLen[p]]
	}
	embeds, err := m.PromptEmbeds(real)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range embeds {
		got.F32(fmt.Sprintf("prompt_embeds.%d", p), e, forwardTol)
	}
	if !intermediates {
		return got
	}

	got.Ints("position_ids", b.pos[:L])
	mask := make([]int, 0, B*L*L)
	for p := range B {
		for i := range L {
			for j := range L {
				mask = append(mask, b2i(j < keysOf(i, b.realLen[p])))
			}
		}
	}
	got.Ints("attn_mask", mask)
	got.F32("rope.inv_freq", tr.invFreq, ropeTol)
	got.F32("rope.cos", tr.cos, ropeTol)
	got.F32("rope.sin", tr.sin, ropeTol)
	H, KV, hd := m.Config.NumAttentionHeads, m.Config.NumKeyValueHeads, m.Config.HeadDim
	got.F32("layer0.q_normed", heads(tr.qNormed, B, L, H, hd), forwardTol)
	got.F32("layer0.k_normed", heads(tr.kNormed, B, L, KV, hd), forwardTol)
	got.F32("layer0.v", heads(tr.v, B, L, KV, hd), forwardTol)
	got.F32("layer0.q_rope", heads(tr.qRope, B, L, H, hd), forwardTol)
	got.F32("layer0.k_rope", heads(tr.kRope, B, L, KV, hd), forwardTol)
	got.F32("layer0.attn_probs", tr.probs, forwardTol)
	got.F32("layer0.attn_out", tr.attnOut, forwardTol)
	return got
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The parity runs: float32 weights against io.safetensors (with every
// intermediate), BF16 weights kept in BF16 against io-bf16.safetensors.
var parityRuns = []struct {
	name, weights, io string
	intermediates     bool
}{
	{"f32", "weights.safetensors", "io.safetensors", true},
	{"bf16", "weights-bf16.safetensors", "io-bf16.safetensors", false},
}

// The model reproduces every tensor of both io files.
func TestFixture(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		for _, r := range parityRuns {
			t.Run(r.name, func(t *testing.T) {
				got := computeQwen(t, c, r.weights, r.io, r.intermediates)
				fixtures.Report(t, fixtures.Compare(filepath.Join(c.Dir, r.io), qwenInputs, got, t.Logf))
			})
		}
	})
}

// A corrupted expected tensor (NaN, or one element 10% off, or a flipped
// mask bit) in a copy of the case fails TestFixture's comparison.
func TestFixtureMutations(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		for _, r := range parityRuns {
			t.Run(r.name, func(t *testing.T) {
				got := computeQwen(t, c, r.weights, r.io, r.intermediates)
				fixtures.CheckMutations(t, c, r.io, qwenInputs, func(mc fixtures.Case) []error {
					return fixtures.Compare(filepath.Join(mc.Dir, r.io), qwenInputs, got, nil)
				})
			})
		}
	})
}

// The BF16 checkpoint's matrices stay BF16 in memory: the projections and
// the embedding table take 2 bytes per parameter.
func TestFixtureBF16Resident(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		m := fixtureModel(t, c, "weights-bf16.safetensors")
		mats := []*matrix{&m.embed}
		for i := range m.layers {
			mats = append(mats, m.layers[i].matrices()...)
		}
		for i, w := range mats {
			if w.bf16 == nil || w.f32 != nil {
				t.Errorf("matrix %d (%d×%d) is not held as BF16", i, w.rows, w.cols)
			}
		}
		f32 := fixtureModel(t, c, "weights.safetensors")
		norms := 4 * int64(len(m.norm))
		for i := range m.layers {
			l := &m.layers[i]
			norms += 4 * int64(len(l.inNorm)+len(l.postNorm)+len(l.qNorm)+len(l.kNorm))
		}
		if got, want := m.WeightBytes()-norms, (f32.WeightBytes()-norms)/2; got != want {
			t.Errorf("BF16 matrices take %d bytes, want half of float32's: %d", got, want)
		}
	})
}

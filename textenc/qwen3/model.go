package qwen3

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/dcdit/dcdit/kernels"
)

// Model is a loaded Qwen3Model. It is safe for concurrent use: forward
// passes only read the weights and take their scratch from a pool.
type Model struct {
	Config Config
	// Source names the checkpoint the weights came from.
	Source string
	// Warnings are assumptions made while loading (configuration values
	// no file gave) and the checkpoint's own warnings.
	Warnings []string

	embed  matrix // [vocab, hidden]
	layers []layer
	norm   []float32
	pool   sync.Pool // of *workspace
}

// layer is one decoder layer's weights.
type layer struct {
	inNorm, postNorm []float32 // [hidden]
	qNorm, kNorm     []float32 // [head_dim], shared by the heads
	q, k, v, o       matrix
	gate, up, down   matrix
}

// WeightBytes is the memory the weights occupy: 2 bytes per parameter of
// a BF16 matrix, 4 for everything else.
func (m *Model) WeightBytes() int64 {
	n := m.embed.bytes() + 4*int64(len(m.norm))
	for i := range m.layers {
		l := &m.layers[i]
		n += 4 * int64(len(l.inNorm)+len(l.postNorm)+len(l.qNorm)+len(l.kNorm))
		for _, w := range l.matrices() {
			n += w.bytes()
		}
	}
	return n
}

func (l *layer) matrices() []*matrix {
	return []*matrix{&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}
}

// Output is the hidden states of a batch of prompts, packed: prompt p owns
// rows Offsets[p] ≤ r < Offsets[p+1] of every state.
type Output struct {
	Offsets []int
	Hidden  int // columns of every state
	// States[k] is transformers' hidden_states[k], [rows, Hidden]: the
	// embeddings for k = 0, the output of decoder layer k−1 for
	// 0 < k < NumHiddenLayers, and for k = NumHiddenLayers the final norm
	// of the last layer's output (last_hidden_state).
	States [][]float32
}

// Prompt returns prompt p's rows of state k.
func (o *Output) Prompt(k, p int) []float32 {
	return o.States[k][o.Offsets[p]*o.Hidden : o.Offsets[p+1]*o.Hidden]
}

// HiddenStates runs the model over the prompts (token ids, unpadded, each
// its own sequence from position 0) and returns every hidden state.
func (m *Model) HiddenStates(ids [][]int) (*Output, error) {
	b, err := m.newBatch(ids, nil)
	if err != nil {
		return nil, err
	}
	return m.hiddenStates(b, nil), nil
}

// HiddenStatesPadded runs the model over a right-padded batch as
// transformers takes it: ids[p] and attentionMask[p] of one length per
// prompt, the mask 1 on the real tokens, which come first, and 0 on the
// padding. Padding rows are computed as the reference computes them
// (attending to the prompt's real tokens); the real rows equal
// HiddenStates' up to float32 summation order.
func (m *Model) HiddenStatesPadded(ids, attentionMask [][]int) (*Output, error) {
	if len(attentionMask) != len(ids) {
		return nil, fmt.Errorf("qwen3: %d attention masks for %d prompts", len(attentionMask), len(ids))
	}
	b, err := m.newBatch(ids, attentionMask)
	if err != nil {
		return nil, err
	}
	return m.hiddenStates(b, nil), nil
}

// PromptEmbeds returns what the Z-Image pipelines condition on:
// hidden_states[-2] of each prompt, [len(ids[p]), hidden]. The last
// decoder layer does not contribute to it and is not run.
func (m *Model) PromptEmbeds(ids [][]int) ([][]float32, error) {
	b, err := m.newBatch(ids, nil)
	if err != nil {
		return nil, err
	}
	D, last := m.Config.HiddenSize, m.Config.NumHiddenLayers-1
	out := make([][]float32, len(ids))
	m.forward(b, last, func(k int, x []float32) {
		if k == last {
			for p := range out {
				out[p] = slices.Clone(x[b.offsets[p]*D : b.offsets[p+1]*D])
			}
		}
	}, nil)
	return out, nil
}

// hiddenStates runs every layer, keeping each state, and the final norm.
func (m *Model) hiddenStates(b *batch, tr *trace) *Output {
	n, D := m.Config.NumHiddenLayers, m.Config.HiddenSize
	out := &Output{Offsets: b.offsets, Hidden: D, States: make([][]float32, n+1)}
	m.forward(b, n, func(k int, x []float32) {
		if k < n {
			out.States[k] = slices.Clone(x)
			return
		}
		out.States[n] = make([]float32, len(x))
		kernels.RMSNormForward(out.States[n], nil, x, m.norm, b.rows(), D, float32(m.Config.RMSNormEps))
	}, tr)
	return out
}

// batch is a set of sequences packed row after row.
type batch struct {
	offsets []int // sequence s owns rows offsets[s] ≤ r < offsets[s+1]
	realLen []int // the number of real (unpadded) tokens of each sequence
	ids     []int // token id of each row
	pos     []int // position of each row within its sequence
}

func (b *batch) rows() int { return b.offsets[len(b.offsets)-1] }

func (b *batch) longest() int {
	l := 0
	for s := 1; s < len(b.offsets); s++ {
		l = max(l, b.offsets[s]-b.offsets[s-1])
	}
	return l
}

// newBatch checks the prompts and packs them. masks is nil for unpadded
// prompts; otherwise masks[p] marks prompt p's real tokens, which must
// come first (right padding).
func (m *Model) newBatch(ids, masks [][]int) (*batch, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("qwen3: no prompts")
	}
	b := &batch{offsets: make([]int, 1, len(ids)+1)}
	for p, row := range ids {
		if len(row) == 0 {
			return nil, fmt.Errorf("qwen3: prompt %d has no tokens", p)
		}
		n := len(row)
		if masks != nil {
			var err error
			if n, err = realTokens(masks[p], len(row)); err != nil {
				return nil, fmt.Errorf("qwen3: prompt %d: %w", p, err)
			}
		}
		for i, id := range row {
			if id < 0 || id >= m.Config.VocabSize {
				return nil, fmt.Errorf("qwen3: prompt %d: token %d is id %d, want 0 ≤ id < vocab_size %d", p, i, id, m.Config.VocabSize)
			}
			b.ids = append(b.ids, id)
			b.pos = append(b.pos, i)
		}
		b.realLen = append(b.realLen, n)
		b.offsets = append(b.offsets, len(b.ids))
	}
	return b, nil
}

// realTokens checks a right-padding attention mask of length l and
// returns its number of ones.
func realTokens(mask []int, l int) (int, error) {
	if len(mask) != l {
		return 0, fmt.Errorf("attention mask has %d entries, want %d (one per token)", len(mask), l)
	}
	n := 0
	for i, v := range mask {
		switch {
		case v != 0 && v != 1:
			return 0, fmt.Errorf("attention mask entry %d is %d, want 0 or 1", i, v)
		case v == 1 && n < i:
			return 0, fmt.Errorf("attention mask entry %d is 1 after padding; only right padding is supported", i)
		case v == 1:
			n++
		}
	}
	if n == 0 {
		// Every key of every row would be masked; transformers then
		// attends uniformly to all keys, future ones included.
		return 0, fmt.Errorf("attention mask has no real token")
	}
	return n, nil
}

// trace receives layer 0's intermediates and the RoPE tables, in the
// forward pass's packed row layout: the parity tests' window into a pass.
type trace struct {
	qNormed, kNormed, v, qRope, kRope, attnOut []float32
	probs                                      []float32 // [heads, L, L] per sequence
	invFreq, cos, sin                          []float32
}

// forward runs the first layers decoder layers over b. keep sees each
// hidden state k = 0..layers (the embeddings, then each layer's output) in
// a buffer that changes after it returns. tr, when not nil, records layer
// 0's intermediates.
func (m *Model) forward(b *batch, layers int, keep func(k int, x []float32), tr *trace) {
	c := m.Config
	N, D, I := b.rows(), c.HiddenSize, c.IntermediateSize
	H, KV, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	eps := float32(c.RMSNormEps)
	seqs, lmax := len(b.offsets)-1, b.longest()

	attn := attnScratch(seqs*H, lmax)
	ws := m.workspace(3*N*D + 2*N*H*hd + 2*N*KV*hd + 2*N*I + attn)
	defer m.pool.Put(ws)
	rest := ws.buf
	cut := func(n int) []float32 {
		s := rest[:n:n]
		rest = rest[n:]
		return s
	}
	x, h, o := cut(N*D), cut(N*D), cut(N*D)
	q, att, k, v := cut(N*H*hd), cut(N*H*hd), cut(N*KV*hd), cut(N*KV*hd)
	g, u, aws := cut(N*I), cut(N*I), cut(attn)

	for r, id := range b.ids {
		m.embed.row(x[r*D:(r+1)*D], id)
	}
	keep(0, x)
	if layers == 0 {
		return
	}

	inv := invFreq(c.RopeTheta, hd)
	cos, sin := ropeTables(inv, lmax)
	if tr != nil {
		tr.invFreq, tr.cos, tr.sin = inv, cos, sin
		n := 0
		for s := 1; s < len(b.offsets); s++ {
			l := b.offsets[s] - b.offsets[s-1]
			n += H * l * l
		}
		tr.probs = make([]float32, n)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))

	for i := range layers {
		l := &m.layers[i]
		var t *trace
		if i == 0 {
			t = tr
		}
		kernels.RMSNormForward(h, nil, x, l.inNorm, N, D, eps)
		l.q.mul(q, h, N)
		l.k.mul(k, h, N)
		l.v.mul(v, h, N)
		kernels.RMSNormForward(q, nil, q, l.qNorm, N*H, hd, eps)
		kernels.RMSNormForward(k, nil, k, l.kNorm, N*KV, hd, eps)
		if t != nil {
			t.qNormed, t.kNormed, t.v = slices.Clone(q), slices.Clone(k), slices.Clone(v)
		}
		rotate(q, cos, sin, b.pos, H, hd)
		rotate(k, cos, sin, b.pos, KV, hd)
		var probs []float32
		if t != nil {
			t.qRope, t.kRope, probs = slices.Clone(q), slices.Clone(k), t.probs
		}
		attend(att, q, k, v, b, H, KV, hd, scale, aws, probs)
		l.o.mul(o, att, N)
		if t != nil {
			t.attnOut = slices.Clone(o)
		}
		kernels.Add(x, x, o)

		kernels.RMSNormForward(h, nil, x, l.postNorm, N, D, eps)
		l.gate.mul(g, h, N)
		l.up.mul(u, h, N)
		kernels.SiLUForward(g, g)
		kernels.Mul(g, g, u)
		l.down.mul(o, g, N)
		kernels.Add(x, x, o)
		keep(i+1, x)
	}
}

// workspace is a forward pass's scratch, reused across passes so that a
// model called repeatedly does not leave its activations as garbage: with
// gigabytes of live weights the collector would let that garbage grow to
// as much again before running.
type workspace struct{ buf []float32 }

// workspace returns at least n values of scratch, reusing a pooled buffer
// when one is large enough.
func (m *Model) workspace(n int) *workspace {
	ws, _ := m.pool.Get().(*workspace)
	if ws == nil || len(ws.buf) < n {
		ws = &workspace{buf: make([]float32, n)}
	}
	return ws
}

package vae

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/kernels"
)

// The forward passes run a batch in chunks of samples over NHWC
// activations held in a few reusable buffers. A pass is first walked in
// planning mode, which runs no kernel but chooses the buffer of every
// activation and records how large each buffer gets and how much kernel
// scratch the largest call needs; then those are allocated once and the
// chunks run through the same code, replaying the choices. A buffer is
// taken (get) for a result and released (put) as soon as its last reader
// is done, so a pass holds about three activations at a time rather than
// one per stage. A chunk holds as many samples as fit chunkBudget (at
// least one): large images run one at a time (a 1024² FLUX decode peaks
// at 2.5 GiB of activations), small ones together, so that the kernels'
// per-call work (weight transforms and packing) is shared and the
// attention has a sequence per sample to spread over the cores.

// chunkBudget bounds the activation buffers of a chunk of samples, in
// bytes, when more than one sample fits.
const chunkBudget = 1 << 30

// act is an activation n×h×w×c in NHWC order: buffer id's first n·h·w·c
// values (id −1: a caller's slice). v is nil while planning.
type act struct {
	id, n, h, w, c int
	v              []float32
}

// tokens is the number of pixels of a, over all its samples.
func (a act) tokens() int { return a.n * a.h * a.w }

// exec runs a forward pass; see the comment above.
type exec struct {
	planning bool
	groups   int
	sizes    []int  // the most elements each buffer holds
	used     []bool // planning: the buffers taken
	choices  []int  // the buffer each get takes, in order
	next     int    // run: the next entry of choices
	bufs     [][]float32
	wsLen    int
	ws       []float32
	// trace, when set, receives each named intermediate of a chunk (the
	// fixture tests compare them with the reference's).
	trace func(name string, a act)
}

// plan walks pass over chunks of up to batch samples, as many as budget
// bytes of activations hold (at least one), and returns the allocated
// exec and the chunk size.
func plan(groups, batch, budget int, pass func(e *exec, n int)) (*exec, int) {
	walk := func(n int) *exec {
		e := &exec{planning: true, groups: groups}
		pass(e, n)
		return e
	}
	bytes := 0
	for _, s := range walk(1).sizes {
		bytes += 4 * s
	}
	chunk := min(batch, max(1, budget/max(bytes, 1)))
	e := walk(chunk)
	if rem := batch % chunk; rem != 0 {
		// Activations scale with the samples, kernel scratch need not.
		e.wsLen = max(e.wsLen, walk(rem).wsLen)
	}
	e.planning = false
	e.bufs = make([][]float32, len(e.sizes))
	for i, n := range e.sizes {
		e.bufs[i] = make([]float32, n)
	}
	e.ws = make([]float32, e.wsLen)
	return e, chunk
}

// external wraps a caller's slice (nil while planning).
func (e *exec) external(v []float32, n, h, w, c int) act {
	if e.planning {
		v = nil
	}
	return act{id: -1, n: n, h: h, w: w, c: c, v: v}
}

// get takes a buffer for an n×h×w×c activation. Planning chooses it: the
// smallest free buffer already large enough, else the largest free one
// (grown), else a new one. The run replays the plan's choices.
func (e *exec) get(n, h, w, c int) act {
	size := n * h * w * c
	a := act{n: n, h: h, w: w, c: c}
	if !e.planning {
		a.id = e.choices[e.next]
		e.next++
		a.v = e.bufs[a.id][:size]
		return a
	}
	fit, big := -1, -1
	for id, used := range e.used {
		switch {
		case used:
		case e.sizes[id] >= size && (fit < 0 || e.sizes[id] < e.sizes[fit]):
			fit = id
		case big < 0 || e.sizes[id] > e.sizes[big]:
			big = id
		}
	}
	switch {
	case fit >= 0:
		a.id = fit
	case big >= 0:
		a.id = big
	default:
		a.id = len(e.used)
		e.used = append(e.used, false)
		e.sizes = append(e.sizes, 0)
	}
	e.used[a.id] = true
	e.sizes[a.id] = max(e.sizes[a.id], size)
	e.choices = append(e.choices, a.id)
	return a
}

// like takes a buffer for an activation of a's samples and size with c
// channels.
func (e *exec) like(a act, c int) act { return e.get(a.n, a.h, a.w, c) }

// put releases a's buffer.
func (e *exec) put(a act) {
	if e.planning && a.id >= 0 {
		e.used[a.id] = false
	}
}

// scratch returns n elements of kernel scratch (nil while planning).
func (e *exec) scratch(n int) []float32 {
	if e.planning {
		e.wsLen = max(e.wsLen, n)
		return nil
	}
	return e.ws[:n]
}

func (e *exec) emit(name string, a act) {
	if e.trace != nil && !e.planning {
		e.trace(name, a)
	}
}

// conv applies p (3×3 with padding 1, or 1×1) to x, writing y.
func (e *exec) conv(y act, x act, p *conv) {
	if p.size == 1 {
		if !e.planning {
			kernels.Conv1x1Forward(y.v, x.v, p.w, p.b, x.tokens(), p.cin, p.cout)
		}
		return
	}
	ws := e.scratch(kernels.Conv3x3Scratch(x.n, x.h, x.w, p.cin, p.cout))
	if !e.planning {
		kernels.Conv3x3Forward(y.v, x.v, p.w, p.b, x.n, x.h, x.w, p.cin, p.cout, ws)
	}
}

// convNew applies p to x into a new activation.
func (e *exec) convNew(x act, p *conv) act {
	y := e.like(x, p.cout)
	e.conv(y, x, p)
	return y
}

// normSiLU returns SiLU(GroupNorm(x)) in a new activation.
func (e *exec) normSiLU(x act, n norm) act {
	y := e.like(x, x.c)
	if !e.planning {
		kernels.GroupNormSiLUForward(y.v, nil, nil, x.v, n.w, n.b, x.n, x.h*x.w, x.c, e.groups, GroupNormEps)
	}
	return y
}

// normSiLUInPlace sets x = SiLU(GroupNorm(x)) (the fused kernel does not
// promise to allow aliasing; these two do).
func (e *exec) normSiLUInPlace(x act, n norm) {
	if !e.planning {
		kernels.GroupNormForward(x.v, nil, nil, x.v, n.w, n.b, x.n, x.h*x.w, x.c, e.groups, GroupNormEps)
		kernels.SiLUForward(x.v, x.v)
	}
}

// add sets y += x.
func (e *exec) add(y, x act) {
	if !e.planning {
		kernels.Add(y.v, y.v, x.v)
	}
}

// resnet applies ResnetBlock2D: conv2(SiLU(norm2(conv1(SiLU(norm1(x))))))
// plus x, or plus conv_shortcut(x) when the width changes. It consumes x.
// With a shortcut, x is needed only for it: computing it first lets norm1
// overwrite x, which keeps the widest activation of a decoder (the first
// resnet after the last upsampler) to one copy.
func (e *exec) resnet(x act, r *resnet) act {
	var h, res act
	if r.shortcut != nil {
		res = e.convNew(x, r.shortcut)
		e.normSiLUInPlace(x, r.norm1)
		h = e.convNew(x, &r.conv1)
		e.put(x)
	} else {
		res = x
		t := e.normSiLU(x, r.norm1)
		h = e.convNew(t, &r.conv1)
		e.put(t)
	}
	e.normSiLUInPlace(h, r.norm2)
	out := e.convNew(h, &r.conv2)
	e.put(h)
	e.add(out, res)
	e.put(res)
	return out
}

// attend applies the mid block's attention with its residual: x +
// to_out(softmax(q·kᵀ/√C)·v), q, k, v projections of GroupNorm(x), one
// head over the h·w positions of each sample. The packed attention kernel
// works through bands of query rows and never holds the (h·w)² scores.
// It consumes x.
func (e *exec) attend(x act, a *attention) act {
	L, C, N := x.h*x.w, x.c, x.tokens()
	t := e.like(x, C)
	if !e.planning {
		kernels.GroupNormForward(t.v, nil, nil, x.v, a.norm.w, a.norm.b, x.n, L, C, e.groups, GroupNormEps)
	}
	qkv := e.like(x, 3*C)
	if !e.planning {
		kernels.LinearForward(qkv.v, t.v, a.qkvW, a.qkvB, N, C, 3*C)
	}
	e.put(t)
	o := e.like(x, C)
	offsets := make([]int, x.n+1)
	for s := range offsets {
		offsets[s] = s * L
	}
	ws := e.scratch(N + kernels.AttentionScratch(offsets, 1, C))
	if !e.planning {
		kernels.AttentionForward(o.v, ws[:N], qkv.v, offsets, 1, C, float32(1/math.Sqrt(float64(C))), ws[N:])
	}
	e.put(qkv)
	y := e.like(x, C)
	if !e.planning {
		kernels.LinearForward(y.v, o.v, a.outW, a.outB, N, C, C)
	}
	e.put(o)
	e.add(y, x)
	e.put(x)
	return y
}

// mid applies UNetMidBlock2D; part ("enc" or "dec") names its trace points.
func (e *exec) mid(x act, m *midBlock, part string) act {
	x = e.resnet(x, &m.res[0])
	if m.attn != nil {
		e.emit(part+".mid.attn.in", x)
		x = e.attend(x, m.attn)
		e.emit(part+".mid.attn.out", x)
	}
	return e.resnet(x, &m.res[1])
}

// downsample is Downsample2D: one zero row and column padded at the bottom
// and right, then the 3×3 conv with stride 2. It consumes x.
func (e *exec) downsample(x act, p *conv) act {
	cp := kernels.Conv2D{Batch: x.n, H: x.h, W: x.w, Cin: p.cin, Cout: p.cout, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadBottom: 1, PadRight: 1}
	y := e.get(x.n, cp.OutH(), cp.OutW(), p.cout)
	ws := e.scratch(kernels.Conv2DScratch(cp))
	if !e.planning {
		kernels.Conv2DForward(y.v, x.v, p.w, p.b, cp, ws)
	}
	e.put(x)
	return y
}

// upsample is Upsample2D: nearest-neighbour ×2, then the 3×3 conv. It
// consumes x.
func (e *exec) upsample(x act, p *conv) act {
	u := e.get(x.n, 2*x.h, 2*x.w, x.c)
	if !e.planning {
		kernels.UpsampleNearest2x(u.v, x.v, x.n, x.h, x.w, x.c)
	}
	e.put(x)
	y := e.convNew(u, p)
	e.put(u)
	return y
}

// encode runs the encoder (and quant_conv) on images, writing their
// moments [n, h, w, 2·latent] (mean channels first, then log-variances).
func (e *exec) encode(m *Model, img act, moments []float32) {
	x := e.convNew(img, &m.enc.convIn)
	e.emit("enc.conv_in", x)
	for i := range m.enc.blocks {
		s := &m.enc.blocks[i]
		for j := range s.resnets {
			x = e.resnet(x, &s.resnets[j])
		}
		if s.sampler != nil {
			x = e.downsample(x, s.sampler)
		}
		e.emit(fmt.Sprintf("enc.down.%d", i), x)
	}
	x = e.mid(x, &m.enc.mid, "enc")
	e.emit("enc.mid", x)
	t := e.normSiLU(x, m.enc.normOut)
	e.put(x)
	out := e.external(moments, t.n, t.h, t.w, m.enc.convOut.cout)
	if m.quant != nil {
		o := e.convNew(t, &m.enc.convOut)
		e.emit("enc.out", o)
		e.conv(out, o, m.quant)
		e.put(o)
	} else {
		e.conv(out, t, &m.enc.convOut)
	}
	e.put(t)
	e.emit("moments", out)
}

// decode runs post_quant_conv and the decoder on latents, writing the
// images into out.
func (e *exec) decode(m *Model, z act, out []float32) {
	x := z
	if m.postQuant != nil {
		x = e.convNew(z, m.postQuant)
		e.emit("dec.post_quant_conv", x)
	}
	y := e.convNew(x, &m.dec.convIn)
	e.put(x)
	e.emit("dec.conv_in", y)
	y = e.mid(y, &m.dec.mid, "dec")
	e.emit("dec.mid", y)
	for i := range m.dec.blocks {
		s := &m.dec.blocks[i]
		for j := range s.resnets {
			y = e.resnet(y, &s.resnets[j])
		}
		if s.sampler != nil {
			y = e.upsample(y, s.sampler)
		}
		e.emit(fmt.Sprintf("dec.up.%d", i), y)
	}
	t := e.normSiLU(y, m.dec.normOut)
	e.put(y)
	e.conv(e.external(out, t.n, t.h, t.w, m.dec.convOut.cout), t, &m.dec.convOut)
	e.put(t)
}

// chunks runs f over the batch in chunks of up to chunk samples: samples
// [b0, b0+n), with the replay of e's plan restarted for each.
func (e *exec) chunks(batch, chunk int, f func(b0, n int)) {
	for b0 := 0; b0 < batch; b0 += chunk {
		e.next = 0
		f(b0, min(chunk, batch-b0))
	}
}

// LatentSize is the latent side the encoder makes of an image side n:
// each downsampler halves it, rounding down. It reports false when a
// downsampler would see fewer than 2 pixels.
func (m *Model) LatentSize(n int) (int, bool) {
	for range m.Config.NumBlocks() - 1 {
		if n < 2 {
			return 0, false
		}
		n /= 2
	}
	return n, n >= 1
}

// Encode runs the encoder on batch images x [batch, h, w, in_channels]
// (NHWC, values in [−1, 1]) and returns the posterior over the latents.
// h and w need not be multiples of the scale factor: each downsampler
// halves a side rounding down, as diffusers' (24×32 → 6×8 with 3 blocks,
// 32×40 → 4×5 with 4).
func (m *Model) Encode(x []float32, batch, h, w int) (*Posterior, error) {
	return m.encodeTrace(x, batch, h, w, chunkBudget, nil)
}

// encodeTrace is Encode in chunks of budget bytes, passing each chunk's
// intermediates to trace with the chunk's first sample.
func (m *Model) encodeTrace(x []float32, batch, h, w, budget int, trace func(b0 int, name string, a act)) (*Posterior, error) {
	cfg := &m.Config
	lh, okh := m.LatentSize(h)
	lw, okw := m.LatentSize(w)
	if batch < 1 || h < 1 || w < 1 || !okh || !okw {
		return nil, fmt.Errorf("vae: encode: batch %d of %d×%d images: want batch ≥ 1 and sides of at least %d", batch, h, w, cfg.ScaleFactor())
	}
	per := h * w * cfg.InChannels
	if len(x) != batch*per {
		return nil, fmt.Errorf("vae: encode: %d values for %d×%d×%d×%d images, want %d", len(x), batch, h, w, cfg.InChannels, batch*per)
	}
	two := 2 * cfg.LatentChannels
	moments := make([]float32, batch*lh*lw*two)
	e, chunk := plan(cfg.NormNumGroups, batch, budget, func(e *exec, n int) {
		e.encode(m, e.external(nil, n, h, w, cfg.InChannels), nil)
	})
	e.chunks(batch, chunk, func(b0, n int) {
		if trace != nil {
			e.trace = func(name string, a act) { trace(b0, name, a) }
		}
		e.encode(m, e.external(x[b0*per:(b0+n)*per], n, h, w, cfg.InChannels), moments[b0*lh*lw*two:(b0+n)*lh*lw*two])
	})
	return NewPosterior(moments, batch, lh, lw, cfg.LatentChannels)
}

// ImageSize is the image side the decoder makes of a latent side n.
func (m *Model) ImageSize(n int) int { return n * m.Config.ScaleFactor() }

// Decode runs the decoder on batch raw (unscaled, see Config.Unscale)
// latents z [batch, h, w, latent_channels] (NHWC) and returns the images
// [batch, ImageSize(h), ImageSize(w), out_channels], not clamped.
func (m *Model) Decode(z []float32, batch, h, w int) ([]float32, error) {
	return m.decodeTrace(z, batch, h, w, chunkBudget, nil)
}

// decodeTrace is Decode in chunks of budget bytes, passing each chunk's
// intermediates to trace with the chunk's first sample.
func (m *Model) decodeTrace(z []float32, batch, h, w, budget int, trace func(b0 int, name string, a act)) ([]float32, error) {
	cfg := &m.Config
	if batch < 1 || h < 1 || w < 1 {
		return nil, fmt.Errorf("vae: decode: batch %d of %d×%d latents: want every size ≥ 1", batch, h, w)
	}
	per := h * w * cfg.LatentChannels
	if len(z) != batch*per {
		return nil, fmt.Errorf("vae: decode: %d values for %d×%d×%d×%d latents, want %d", len(z), batch, h, w, cfg.LatentChannels, batch*per)
	}
	img := m.ImageSize(h) * m.ImageSize(w) * cfg.OutChannels
	out := make([]float32, batch*img)
	e, chunk := plan(cfg.NormNumGroups, batch, budget, func(e *exec, n int) {
		e.decode(m, e.external(nil, n, h, w, cfg.LatentChannels), nil)
	})
	e.chunks(batch, chunk, func(b0, n int) {
		if trace != nil {
			e.trace = func(name string, a act) { trace(b0, name, a) }
		}
		e.decode(m, e.external(z[b0*per:(b0+n)*per], n, h, w, cfg.LatentChannels), out[b0*img:(b0+n)*img])
	})
	return out, nil
}

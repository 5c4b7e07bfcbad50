package kernels

import (
	"fmt"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// Conv2DForward is the general form of Conv3x3Forward: any kernel size,
// stride and per-side zero padding, over the same token-major grids. It is
// an implicit GEMM as well: output pixels are cut into blocks, a worker
// gathers a block's receptive fields into a column panel in its scratch
// (im2col, tap-major: column (kh·KW + kw)·Cin + c) and multiplies it by the
// weights, reordered to match and packed for the GEMM once per call. Each
// output pixel belongs to one block and each block is computed by one
// worker with a serial GEMM, so the bits do not depend on scheduling or on
// the number of cores.
//
// Token-major storage makes the gather cheap whatever the stride: the KW
// taps of one kernel row are KW consecutive input pixels, one contiguous
// run of KW·Cin values.
//
// Two shapes skip the gather: a 1×1 stride-1 unpadded convolution is one
// GEMM over all pixels (Conv1x1Forward), and a 3×3 stride-1 convolution
// padded by 1 on every side with at least winoMinChannels channels each way
// runs Winograd's F(2×2, 3×3) (winograd3x3Forward), which costs 2.25×
// fewer multiply-adds. Other 3×3 stride-1 paddings stay on im2col: run as
// the 1-padded Winograd product and cropped, Inception's unpadded layers
// measured slower, the per-call weight transform and the crop costing more
// than the products saved.

// Conv2D describes a convolution: input Batch×H×W×Cin, weights
// Cout×Cin×KH×KW, strides and per-side zero padding.
type Conv2D struct {
	Batch, H, W, Cin, Cout               int
	KH, KW                               int
	StrideH, StrideW                     int
	PadTop, PadBottom, PadLeft, PadRight int
}

// OutH is the output height, (H+PadTop+PadBottom−KH)/StrideH + 1.
func (p Conv2D) OutH() int { return (p.H+p.PadTop+p.PadBottom-p.KH)/p.StrideH + 1 }

// OutW is the output width, (W+PadLeft+PadRight−KW)/StrideW + 1.
func (p Conv2D) OutW() int { return (p.W+p.PadLeft+p.PadRight-p.KW)/p.StrideW + 1 }

// Validate reports the first field that makes p unusable: a negative batch
// or padding, a non-positive size, channel count, kernel size or stride, or
// a kernel larger than the padded input (no output pixel).
func (p Conv2D) Validate() error {
	switch {
	case p.Batch < 0:
		return fmt.Errorf("kernels: conv2d: batch %d, want ≥ 0", p.Batch)
	case p.H < 1 || p.W < 1:
		return fmt.Errorf("kernels: conv2d: input %d×%d, want ≥ 1×1", p.H, p.W)
	case p.Cin < 1 || p.Cout < 1:
		return fmt.Errorf("kernels: conv2d: channels %d→%d, want ≥ 1 each", p.Cin, p.Cout)
	case p.KH < 1 || p.KW < 1:
		return fmt.Errorf("kernels: conv2d: kernel %d×%d, want ≥ 1×1", p.KH, p.KW)
	case p.StrideH < 1 || p.StrideW < 1:
		return fmt.Errorf("kernels: conv2d: stride %d×%d, want ≥ 1×1", p.StrideH, p.StrideW)
	case p.PadTop < 0 || p.PadBottom < 0 || p.PadLeft < 0 || p.PadRight < 0:
		return fmt.Errorf("kernels: conv2d: padding top %d bottom %d left %d right %d, want ≥ 0",
			p.PadTop, p.PadBottom, p.PadLeft, p.PadRight)
	case p.H+p.PadTop+p.PadBottom < p.KH || p.W+p.PadLeft+p.PadRight < p.KW:
		return fmt.Errorf("kernels: conv2d: kernel %d×%d larger than padded input %d×%d",
			p.KH, p.KW, p.H+p.PadTop+p.PadBottom, p.W+p.PadLeft+p.PadRight)
	}
	return nil
}

// Messages of Conv2DForward's panics on caller bugs.
const (
	errConv2DX       = "kernels: conv2d: x shorter than Batch·H·W·Cin"
	errConv2DY       = "kernels: conv2d: y shorter than Batch·OutH·OutW·Cout"
	errConv2DW       = "kernels: conv2d: w shorter than Cout·Cin·KH·KW"
	errConv2DBias    = "kernels: conv2d: bias shorter than Cout"
	errConv2DScratch = "kernels: conv2d: scratch smaller than Conv2DScratch"
)

// conv2DPath is how Conv2DForward computes a convolution.
type conv2DPath int

const (
	pathIm2col    conv2DPath = iota
	pathPointwise            // Conv1x1Forward
	pathWinograd             // winograd3x3Forward
)

func (p Conv2D) path() conv2DPath {
	pad := p.PadTop | p.PadBottom | p.PadLeft | p.PadRight
	switch {
	case p.KH == 1 && p.KW == 1 && p.StrideH == 1 && p.StrideW == 1 && pad == 0:
		return pathPointwise
	case p.KH == 3 && p.KW == 3 && p.StrideH == 1 && p.StrideW == 1 &&
		p.PadTop == 1 && p.PadBottom == 1 && p.PadLeft == 1 && p.PadRight == 1 &&
		useWinograd(p.Cin, p.Cout):
		return pathWinograd
	}
	return pathIm2col
}

// conv2DPlan is how the im2col path cuts the output pixels into blocks.
type conv2DPlan struct {
	tokens int // Batch·OutH·OutW
	k      int // KH·KW·Cin, the width of a column panel
	rows   int // output pixels per block (the last block may be shorter)
	blocks int
	packed int // packed weights, at the widest element type
}

func newConv2DPlan(p Conv2D, z convSizing) conv2DPlan {
	q := conv2DPlan{tokens: p.Batch * p.OutH() * p.OutW(), k: p.KH * p.KW * p.Cin}
	q.packed = max(gemm.PackedBLen[float32](q.k, p.Cout), gemm.PackedBLen[float64](q.k, p.Cout))
	if q.tokens == 0 {
		return q
	}
	q.rows = max(z.budget/q.k, z.minRows)
	if q.rows >= convRowAlign {
		q.rows -= q.rows % convRowAlign
	}
	q.rows = min(q.rows, q.tokens)
	q.blocks = (q.tokens + q.rows - 1) / q.rows
	return q
}

// scratch is the im2col path's need with workers workers: the reordered
// and the packed weights, then one column panel per worker.
func (q conv2DPlan) scratch(cout, workers int) int {
	return q.k*cout + q.packed + workers*q.rows*q.k
}

// Conv2DScratch returns the number of T elements of scratch space ws that
// Conv2DForward needs for p (0 for a 1×1 stride-1 unpadded convolution).
// It panics if p is invalid.
func Conv2DScratch(p Conv2D) int {
	if err := p.Validate(); err != nil {
		panic(err.Error())
	}
	if p.Batch == 0 {
		return 0
	}
	switch p.path() {
	case pathPointwise:
		return 0
	case pathWinograd:
		return winogradScratch(p.Batch, p.H, p.W, p.Cin, p.Cout, winoDefault)
	}
	q := newConv2DPlan(p, convDefault)
	return q.scratch(p.Cout, workersFor(q.blocks))
}

// Conv2DForward computes PyTorch's F.conv2d(F.pad(x, (PadLeft, PadRight,
// PadTop, PadBottom)), w, bias, stride=(StrideH, StrideW)) over token-major
// grids: x is [Batch·H·W, Cin] with sample b's pixel (i, j) at row
// (b·H + i)·W + j, w is [Cout, Cin, KH, KW] (PyTorch layout), bias is
// [Cout] or nil, and y is [Batch·OutH·OutW, Cout] in the same order. ws
// holds at least Conv2DScratch(p) elements. It panics with a "kernels:
// conv2d: ..." message when p is invalid or a slice is too short.
func Conv2DForward[T gemm.Float](y, x, w, bias []T, p Conv2D, ws []T) {
	conv2DForward(y, x, w, bias, p, ws, convDefault)
}

func conv2DForward[T gemm.Float](y, x, w, bias []T, p Conv2D, ws []T, z convSizing) {
	if err := p.Validate(); err != nil {
		panic(err.Error())
	}
	oh, ow := p.OutH(), p.OutW()
	switch {
	case len(x) < p.Batch*p.H*p.W*p.Cin:
		panic(errConv2DX)
	case len(y) < p.Batch*oh*ow*p.Cout:
		panic(errConv2DY)
	case len(w) < p.Cout*p.Cin*p.KH*p.KW:
		panic(errConv2DW)
	case bias != nil && len(bias) < p.Cout:
		panic(errConv2DBias)
	}
	if p.Batch == 0 {
		return
	}
	if z == convDefault {
		switch p.path() {
		case pathPointwise:
			Conv1x1Forward(y, x, w, bias, p.Batch*p.H*p.W, p.Cin, p.Cout)
			return
		case pathWinograd:
			// winograd3x3Forward runs fewer workers in a scratch too small for
			// all of them, but needs one.
			if len(ws) < newWinoPlan(p.Batch, p.H, p.W, p.Cin, p.Cout, winoDefault).scratch(1) {
				panic(errConv2DScratch)
			}
			winograd3x3Forward(y, x, w, bias, p.Batch, p.H, p.W, p.Cin, p.Cout, ws, winoDefault)
			return
		}
	}
	q := newConv2DPlan(p, z)
	workers := workersFor(q.blocks)
	for workers > 1 && q.scratch(p.Cout, workers) > len(ws) {
		workers--
	}
	if q.scratch(p.Cout, workers) > len(ws) {
		panic(errConv2DScratch)
	}
	cout, taps := p.Cout, p.KH*p.KW
	// wt is [cout, k], w with each row reordered from (c, tap) to the
	// panels' (tap, c): a transpose within a row, which stays in cache
	// where writing the transposed [k, cout] directly would miss on every
	// element. A 1×1 kernel is in that order already.
	wt := w[:q.k*cout]
	if taps > 1 {
		wt = ws[:q.k*cout]
		parallel.For(cout, max(1, ewGrain/q.k), func(lo, hi int) {
			for co := lo; co < hi; co++ {
				row := wt[co*q.k : (co+1)*q.k]
				for c := range p.Cin {
					src := w[(co*p.Cin+c)*taps : (co*p.Cin+c+1)*taps]
					for tap, v := range src {
						row[tap*p.Cin+c] = v
					}
				}
			}
		})
	}
	pb := gemm.PackB(ws[q.k*cout:q.k*cout+q.packed], true, q.k, cout, wt, q.k)
	per := q.rows * q.k
	free := ws[q.k*cout+q.packed:]
	forItems(q.blocks, workers, func(wk, b int) {
		col := free[wk*per : (wk+1)*per]
		t0 := b * q.rows
		t1 := min(t0+q.rows, q.tokens)
		im2col2D(col, x, t0, t1, oh, ow, p)
		yb := y[t0*cout : t1*cout]
		var beta T
		if bias != nil {
			for t := range t1 - t0 {
				copy(yb[t*cout:(t+1)*cout], bias[:cout])
			}
			beta = 1
		}
		gemm.GemmPackedB(false, t1-t0, 1, col, q.k, pb, beta, yb, cout)
	})
}

// im2col2D gathers the receptive fields of output pixels t0..t1-1 (grids
// of oh×ow) into col [t1−t0, KH·KW·Cin], tap-major, with zeros where a tap
// falls in the padding. Blocks may span samples: each pixel's sample is
// derived from its index.
func im2col2D[T gemm.Float](col, x []T, t0, t1, oh, ow int, p Conv2D) {
	cin := p.Cin
	run := p.KW * cin
	k := p.KH * run
	b := t0 / (oh * ow)
	oi := (t0 - b*oh*ow) / ow
	oj := t0 - b*oh*ow - oi*ow
	for t := t0; t < t1; t++ {
		dst := col[(t-t0)*k : (t-t0+1)*k]
		i0 := oi*p.StrideH - p.PadTop
		j0 := oj*p.StrideW - p.PadLeft
		// Taps lo ≤ kw < hi of a kernel row fall inside the input.
		lo, hi := max(0, -j0), min(p.KW, p.W-j0)
		for kh := range p.KH {
			seg := dst[kh*run : (kh+1)*run]
			ii := i0 + kh
			if ii < 0 || ii >= p.H || lo >= hi {
				clear(seg)
				continue
			}
			src := ((b*p.H+ii)*p.W + j0) * cin
			clear(seg[:lo*cin])
			copy(seg[lo*cin:hi*cin], x[src+lo*cin:src+hi*cin])
			clear(seg[hi*cin:])
		}
		if oj++; oj == ow {
			oj = 0
			if oi++; oi == oh {
				oi = 0
				b++
			}
		}
	}
}

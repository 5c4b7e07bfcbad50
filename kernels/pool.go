package kernels

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// The pooling and resampling kernels work on the token-major grids of
// Conv2DForward: x is [batch·h·w, c] with sample b's pixel (i, j) at row
// (b·h + i)·w + j. Every output row (one sample, one output line) is
// written by one task from its inputs alone, so they are parallel over
// batch×rows without affecting the bits, and each pixel's channels are one
// contiguous run that the inner loops sweep.

// Messages of the pooling kernels' panics on caller bugs.
const (
	errPoolDims = "kernels: pool needs batch ≥ 0, h, w, c, k, stride ≥ 1 and 0 ≤ pad ≤ k/2"
	errPoolOut  = "kernels: pool window larger than the padded input"
	errPoolX    = "kernels: pool x shorter than batch·h·w·c"
	errPoolY    = "kernels: pool y shorter than its output"
)

// poolOut checks a pooling's arguments and returns its output size.
func poolOut(xLen, yLen, batch, h, w, c, k, stride, pad int) (oh, ow int) {
	if batch < 0 || h < 1 || w < 1 || c < 1 || k < 1 || stride < 1 || pad < 0 || 2*pad > k {
		panic(errPoolDims)
	}
	if h+2*pad < k || w+2*pad < k {
		panic(errPoolOut)
	}
	oh, ow = (h+2*pad-k)/stride+1, (w+2*pad-k)/stride+1
	if xLen < batch*h*w*c {
		panic(errPoolX)
	}
	if yLen < batch*oh*ow*c {
		panic(errPoolY)
	}
	return oh, ow
}

// rowGrain is how many output rows of the given cost (elements read) make
// a task worth a goroutine.
func rowGrain(cost int) int { return max(1, ewGrain/max(cost, 1)) }

// MaxPool2D computes PyTorch's F.max_pool2d(x, k, stride, pad) (square
// window, floor mode): y is [batch·oh·ow, c] with oh = (h+2·pad−k)/stride
// + 1, and likewise ow. The padding never wins (it counts as −Inf) and a
// NaN in a window propagates. It panics unless 0 ≤ pad ≤ k/2, as PyTorch
// requires.
func MaxPool2D[T gemm.Float](y, x []T, batch, h, w, c, k, stride, pad int) {
	poolWindows(y, x, batch, h, w, c, k, stride, pad, func(dst []T, taps int) {}, poolMax[T])
}

// AvgPool2D computes PyTorch's F.avg_pool2d(x, k, stride, pad,
// count_include_pad=countIncludePad) (square window, floor mode), with the
// output size of MaxPool2D. Each window's in-image values are summed in
// row-major order and divided by k² when countIncludePad is set, else by
// the number of in-image taps (TensorFlow's and pytorch-fid's semantics).
// It panics unless 0 ≤ pad ≤ k/2.
func AvgPool2D[T gemm.Float](y, x []T, batch, h, w, c, k, stride, pad int, countIncludePad bool) {
	poolWindows(y, x, batch, h, w, c, k, stride, pad, func(dst []T, taps int) {
		if countIncludePad {
			taps = k * k
		}
		poolDiv(dst, T(taps))
	}, poolAdd[T])
}

// poolWindows runs a pooling: each output pixel starts as a copy of its
// window's first in-image pixel, merge folds in the others in row-major
// order, and finish gets the pixel and its number of in-image taps. With
// pad ≤ k/2 every window holds an in-image pixel, so the padding never
// takes part.
func poolWindows[T gemm.Float](y, x []T, batch, h, w, c, k, stride, pad int, finish func(dst []T, taps int), merge func(dst, src []T)) {
	oh, ow := poolOut(len(x), len(y), batch, h, w, c, k, stride, pad)
	parallel.For(batch*oh, rowGrain(ow*k*k*c), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			b, oi := r/oh, r%oh
			i0, i1 := max(oi*stride-pad, 0), min(oi*stride-pad+k, h)
			for oj := range ow {
				j0, j1 := max(oj*stride-pad, 0), min(oj*stride-pad+k, w)
				dst := y[(r*ow+oj)*c : (r*ow+oj+1)*c]
				for i := i0; i < i1; i++ {
					for j := j0; j < j1; j++ {
						src := x[((b*h+i)*w+j)*c : ((b*h+i)*w+j+1)*c]
						if i == i0 && j == j0 {
							copy(dst, src)
						} else {
							merge(dst, src)
						}
					}
				}
				finish(dst, (i1-i0)*(j1-j0))
			}
		}
	})
}

// poolMax sets dst[i] = max(dst[i], src[i]), a NaN on either side winning.
func poolMax[T gemm.Float](dst, src []T) {
	src = src[:len(dst)]
	i := 0
	if poolAsm && !actPrecise[T]() && len(dst) >= 8 {
		i = len(dst) &^ 7
		poolMaxAVX(f32p(dst), f32p(src), i)
	}
	for ; i < len(dst); i++ {
		dst[i] = max(dst[i], src[i])
	}
}

// poolAdd sets dst[i] += src[i].
func poolAdd[T gemm.Float](dst, src []T) {
	src = src[:len(dst)]
	i := 0
	if poolAsm && !actPrecise[T]() && len(dst) >= 8 {
		i = len(dst) &^ 7
		poolAddAVX(f32p(dst), f32p(src), i)
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// poolDiv sets dst[i] /= d.
func poolDiv[T gemm.Float](dst []T, d T) {
	i := 0
	if poolAsm && !actPrecise[T]() && len(dst) >= 8 {
		i = len(dst) &^ 7
		poolDivAVX(f32p(dst), float32(d), i)
	}
	for ; i < len(dst); i++ {
		dst[i] /= d
	}
}

// UpsampleNearest2x computes PyTorch's F.interpolate(x, scale_factor=2,
// mode="nearest"): y is [batch·2h·2w, c] and pixel (i, j) of y is pixel
// (i/2, j/2) of x.
func UpsampleNearest2x[T gemm.Float](y, x []T, batch, h, w, c int) {
	if batch < 0 || h < 1 || w < 1 || c < 1 {
		panic(errPoolDims)
	}
	if len(x) < batch*h*w*c {
		panic(errPoolX)
	}
	if len(y) < batch*4*h*w*c {
		panic(errPoolY)
	}
	row := 2 * w * c // one output line
	parallel.For(batch*h, rowGrain(2*row), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			src := x[r*w*c : (r+1)*w*c]
			even := y[2*r*row : (2*r+1)*row]
			for j := range w {
				px := src[j*c : (j+1)*c]
				copy(even[2*j*c:(2*j+1)*c], px)
				copy(even[(2*j+1)*c:(2*j+2)*c], px)
			}
			copy(y[(2*r+1)*row:(2*r+2)*row], even)
		}
	})
}

// gapGroup is how many channels GlobalAvgPool sums at a time in a stack
// array of float64 accumulators.
const gapGroup = 64

// GlobalAvgPool computes PyTorch's F.adaptive_avg_pool2d(x, 1): y is
// [batch, c], the mean of each sample's h·w pixels per channel. Sums are
// taken in float64 in pixel order and divided by h·w before rounding to T.
func GlobalAvgPool[T gemm.Float](y, x []T, batch, h, w, c int) {
	if batch < 0 || h < 1 || w < 1 || c < 1 {
		panic(errPoolDims)
	}
	if len(x) < batch*h*w*c {
		panic(errPoolX)
	}
	if len(y) < batch*c {
		panic(errPoolY)
	}
	hw := h * w
	groups := (c + gapGroup - 1) / gapGroup
	parallel.For(batch*groups, rowGrain(hw*gapGroup), func(lo, hi int) {
		for g := lo; g < hi; g++ {
			b, c0 := g/groups, g%groups*gapGroup
			n := min(gapGroup, c-c0)
			var acc [gapGroup]float64
			for t := range hw {
				src := x[(b*hw+t)*c+c0 : (b*hw+t)*c+c0+n]
				for j, v := range src {
					acc[j] += float64(v)
				}
			}
			dst := y[b*c+c0 : b*c+c0+n]
			for j := range dst {
				dst[j] = T(acc[j] / float64(hw))
			}
		}
	})
}

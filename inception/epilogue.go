package inception

import "github.com/dcdit/dcdit/kernels/parallel"

// The convolutions write raw products; these loops add the folded
// BatchNorm bias, apply the ReLU and scatter each branch into its channel
// range of the concatenated block output (or into a contiguous buffer for
// the next convolution of the branch) in the same pass, so the
// concatenation costs no copy of its own.

// epilogueGrain is the fewest pixels worth a goroutine of their own.
const epilogueGrain = 256

// segment sends channels [src, src+len(bias)) of each source pixel to
// channels [off, off+len(bias)) of dst, whose pixels hold ld channels.
type segment struct {
	src     int
	bias    []float32
	dst     []float32
	ld, off int
}

// biasReLU computes dst = max(src + bias, 0) for every segment over pixels
// rows of src, each holding lds channels. A segment may write in place.
func biasReLU(src []float32, lds, pixels int, segs ...segment) {
	parallel.For(pixels, epilogueGrain, func(lo, hi int) {
		for _, s := range segs {
			n := len(s.bias)
			for p := lo; p < hi; p++ {
				in := src[p*lds+s.src : p*lds+s.src+n]
				out := s.dst[p*s.ld+s.off : p*s.ld+s.off+n]
				addReLU(out, in, s.bias)
			}
		}
	})
}

// addReLU computes out = max(in + bias, 0); the three have one length.
func addReLU(out, in, bias []float32) {
	in, out = in[:len(bias)], out[:len(bias)]
	for c, b := range bias {
		out[c] = max(in[c]+b, 0)
	}
}

// avgPoolBiasReLU computes s's segment as biasReLU does, after a 3×3
// stride-1 average pool with one pixel of padding that divides by the
// number of in-image taps (count_include_pad=False, pytorch-fid's
// FIDInception blocks). src holds nb images of side×side pixels of lds
// channels. Each output row sums its (up to) three input rows per column
// first, then three columns of those sums.
func avgPoolBiasReLU(src []float32, lds, nb, side int, s segment) {
	n := len(s.bias)
	parallel.For(nb*side, max(epilogueGrain/side, 1), func(lo, hi int) {
		cols := make([]float32, side*n)
		sum := make([]float32, n)
		for r := lo; r < hi; r++ {
			b, i := r/side, r%side
			i0, i1 := max(i-1, 0), min(i+1, side-1)
			clear(cols)
			for ii := i0; ii <= i1; ii++ {
				row := (b*side + ii) * side
				for j := range side {
					p := row + j
					in := src[p*lds+s.src : p*lds+s.src+n]
					acc := cols[j*n : (j+1)*n]
					in = in[:len(acc)]
					for c, v := range in {
						acc[c] += v
					}
				}
			}
			for j := range side {
				j0, j1 := max(j-1, 0), min(j+1, side-1)
				copy(sum, cols[j0*n:(j0+1)*n])
				for jj := j0 + 1; jj <= j1; jj++ {
					acc := cols[jj*n : (jj+1)*n]
					acc = acc[:len(sum)]
					for c, v := range acc {
						sum[c] += v
					}
				}
				count := float32((i1 - i0 + 1) * (j1 - j0 + 1))
				p := r*side + j
				out := s.dst[p*s.ld+s.off : p*s.ld+s.off+n]
				out = out[:len(sum)]
				bias := s.bias[:len(sum)]
				for c, v := range sum {
					out[c] = max(v/count+bias[c], 0)
				}
			}
		}
	})
}

// maxPoolTo computes a 3×3 stride-2 unpadded max pool of src (nb images
// of h×w pixels of c channels) into channels [off, off+c) of dst, whose
// pixels hold ld channels. With a bias it stores ReLU(max + bias): the max
// pool of a convolution's raw output then yields the pool of its
// activations, since adding a per-channel constant and the ReLU are
// monotone. Fusing the pool with that epilogue, or with the copy into a
// concatenated output, saves a pass over the map.
func maxPoolTo(dst []float32, ld, off int, src []float32, c, nb, h, w int, bias []float32) {
	oh, ow := (h-3)/2+1, (w-3)/2+1
	parallel.For(nb*oh, max(epilogueGrain/ow, 1), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			b, i := r/oh, r%oh
			for j := range ow {
				p := r*ow + j
				out := dst[p*ld+off : p*ld+off+c]
				first := ((b*h+2*i)*w + 2*j) * c
				copy(out, src[first:first+c])
				for di := range 3 {
					for dj := range 3 {
						q := ((b*h+2*i+di)*w + 2*j + dj) * c
						in := src[q : q+c]
						in = in[:len(out)]
						// The builtin max has no data-dependent branch
						// (a compare-and-branch loop mispredicts on
						// activations) and propagates NaN like PyTorch.
						for k, v := range in {
							out[k] = max(out[k], v)
						}
					}
				}
				if bias != nil {
					addReLU(out, out, bias)
				}
			}
		}
	})
}

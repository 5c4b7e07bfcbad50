package kernels

import (
	"unsafe"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// Winograd's minimal filtering F(2×2, 3×3) computes a 3×3 convolution
// (stride 1, zero padding 1) tile by tile: each 2×2 output tile comes from
// its 4×4 input patch d as
//
//	Y = Aᵀ·[Σ_c (G·g_c·Gᵀ) ⊙ (Bᵀ·d_c·B)]·A
//
// with
//
//	Bᵀ = | 1  0 −1  0 |    G = | 1   0   0 |    Aᵀ = | 1  1  1  0 |
//	     | 0  1  1  0 |        | ½   ½   ½ |         | 0  1 −1 −1 |
//	     | 0 −1  1  0 |        | ½  −½   ½ |
//	     | 0  1  0 −1 |        | 0   0   1 |
//
// so the sum over input channels becomes 16 independent matrix products,
// one per position ξ of the 4×4 transformed tile: M_ξ [tiles, cout] =
// V_ξ [tiles, cin] · U_ξ [cin, cout], 16·cin·cout multiply-adds per tile
// of 4 outputs against 36·cin·cout directly (2.25× fewer). The transforms
// are additions only, vectorised along the channels, which token-major
// storage keeps contiguous.
//
// Tiles are processed in blocks: a worker transforms a block's patches
// into V (16 × block × cin), runs the 16 products into M (16 × block ×
// cout) against U packed once per call (gemm.PackB), and transforms M back
// into the block's outputs. Every output element is written by one tile of
// one block, so blocks are independent and results do not depend on
// scheduling.
//
// Rounding differs from the direct product: the transforms add up to 4
// inputs (Bᵀ·d·B) and 4 products (Aᵀ·M·A), which leaves float32 results
// within a few units in the last place of the products' magnitude, far
// inside the tolerances the convolution's users are tested to.

// winoSizing bounds a worker's V and M blocks (elements) and their tile
// count.
type winoSizing struct{ budget, minTiles, maxTiles int }

// winoDefault keeps V and M of a block near 512 KiB together (L2), with at
// least 24 tiles (four 6-row slivers of the micro-kernel) per product.
var winoDefault = winoSizing{budget: 1 << 17, minTiles: 24, maxTiles: 96}

// winoMinChannels is the smallest cin and cout that take the Winograd
// path: with a handful of channels the transforms cost more than the
// products they save (DC-DiT's 4-channel latent embedder stays direct).
const winoMinChannels = 16

// useWinograd reports whether a 3×3 convolution of these widths takes the
// Winograd path.
func useWinograd(cin, cout int) bool { return cin >= winoMinChannels && cout >= winoMinChannels }

// winoPlan is how a convolution is cut into tile blocks.
type winoPlan struct {
	th, tw   int // tiles per column and row of a grid
	tiles    int // batch·th·tw
	block    int // tiles per block (the last may be shorter)
	blocks   int
	cin      int
	cout     int
	packLen  int // one packed U_ξ, at the widest element type
	perBlock int // V and M of one worker
}

func newWinoPlan(batch, height, width, cin, cout int, z winoSizing) winoPlan {
	p := winoPlan{th: (height + 1) / 2, tw: (width + 1) / 2, cin: cin, cout: cout}
	p.tiles = batch * p.th * p.tw
	p.block = min(max(z.budget/(16*(cin+cout)), z.minTiles), z.maxTiles)
	p.block = max(1, min(p.block, p.tiles))
	if p.tiles > 0 {
		p.blocks = (p.tiles + p.block - 1) / p.block
	}
	p.packLen = max(gemm.PackedBLen[float32](cin, cout), gemm.PackedBLen[float64](cin, cout))
	// V, M and the transforms' temporaries (16·cin in, 9·cout out).
	p.perBlock = 16*p.block*(cin+cout) + 16*cin + 9*cout
	return p
}

// scratch is the elements a call needs with workers workers: the
// transformed weights (16·cin·cout), their packed copies and the workers'
// blocks.
func (p winoPlan) scratch(workers int) int {
	if p.tiles == 0 {
		return 0
	}
	return 16*p.cin*p.cout + 16*p.packLen + workers*p.perBlock
}

// winogradScratch is Winograd3x3Forward's scratch for the default sizing
// and as many workers as there are blocks or cores.
func winogradScratch(batch, height, width, cin, cout int, z winoSizing) int {
	p := newWinoPlan(batch, height, width, cin, cout, z)
	return p.scratch(workersFor(p.blocks))
}

// workersFor is how many workers blocks can keep busy on this machine.
func workersFor(blocks int) int { return parallel.Workers(blocks, 1) }

// winoConvScratch is what Conv3x3Forward and Conv3x3Backward need for the
// Winograd path: the forward product, or dx as the convolution of dy
// (cout channels) with the flipped kernel (9·cin·cout more elements).
func winoConvScratch(batch, height, width, cin, cout int) int {
	p := newWinoPlan(batch, height, width, cin, cout, winoDefault)
	return max(winogradScratch(batch, height, width, cin, cout, winoDefault),
		9*cin*cout+winogradScratch(batch, height, width, cout, cin, winoDefault),
		winoFilterScratch(p, workersFor(gradChunks(p.blocks))))
}

// winoFilter computes Conv3x3Backward's dw with F(2×2, 3×3): the forward
// is Y = Aᵀ·(U ⊙ V)·A per tile with U = G·g·Gᵀ, so
//
//	dU_ξ[c][co] = Σ_tiles V_ξ[tile][c] · Ŷ_ξ[tile][co],  Ŷ = A·dY·Aᵀ
//	dg = Gᵀ·dU·G
//
// 16 products of [cin, tiles]·[tiles, cout] in place of 9 of 4·tiles.
// The blocks are cut into gradChunks fixed runs, each summed into its own
// dU, and the chunks' dU are added in chunk order: the chunks depend on the
// problem's size alone, so the result depends neither on scheduling nor on
// the number of cores.
func winoFilter[T gemm.Float](dw, dy, x []T, batch, height, width, cin, cout int, ws []T) {
	p := newWinoPlan(batch, height, width, cin, cout, winoDefault)
	if p.tiles == 0 {
		clear(dw[:cout*cin*9])
		return
	}
	chunks := gradChunks(p.blocks)
	workers := workersFor(chunks)
	for workers > 1 && winoFilterScratch(p, workers) > len(ws) {
		workers--
	}
	if winoFilterScratch(p, workers) > len(ws) {
		panic(errConvScratch)
	}
	// The chunks' dU, then the workers' V, Ŷ and temporaries.
	nu := 16 * cin * cout
	parts := ws[:chunks*nu]
	per := winoFilterPer(p)
	free := ws[chunks*nu:]
	zero := make([]T, max(cin, cout))
	forItems(chunks, workers, func(wk, ch int) {
		s := free[wk*per : (wk+1)*per]
		v := s[:16*p.block*cin]
		yh := s[16*p.block*cin : 16*p.block*(cin+cout)]
		tmp := s[16*p.block*(cin+cout):]
		du := parts[ch*nu : (ch+1)*nu]
		b0, b1 := ch*p.blocks/chunks, (ch+1)*p.blocks/chunks
		for b := b0; b < b1; b++ {
			t0 := b * p.block
			t1 := min(t0+p.block, p.tiles)
			n := t1 - t0
			winoInput(v, x, zero[:cin], tmp, t0, t1, p, height, width)
			winoGradOutput(yh, dy, zero[:cout], tmp, t0, t1, p, height, width)
			var beta T
			if b > b0 {
				beta = 1
			}
			for xi := range 16 {
				gemm.GemmSerial(true, false, cin, cout, n, 1, v[xi*p.block*cin:], cin, yh[xi*p.block*cout:], cout,
					beta, du[xi*cin*cout:(xi+1)*cin*cout], cout)
			}
		}
	})
	// dg = Gᵀ·dU·G per (c, co), the chunks' partials summed first.
	sumChunks(parts, nu, chunks)
	parallel.For(cout, 4, func(lo, hi int) {
		var u [16]T
		for co := lo; co < hi; co++ {
			for c := range cin {
				for xi := range 16 {
					u[xi] = parts[xi*cin*cout+c*cout+co]
				}
				var t [3][4]T
				for s := range 4 {
					t[0][s] = u[s] + (u[4+s]+u[8+s])/2
					t[1][s] = (u[4+s] - u[8+s]) / 2
					t[2][s] = (u[4+s]+u[8+s])/2 + u[12+s]
				}
				g := dw[(co*cin+c)*9 : (co*cin+c+1)*9]
				for r := range 3 {
					g[3*r] = t[r][0] + (t[r][1]+t[r][2])/2
					g[3*r+1] = (t[r][1] - t[r][2]) / 2
					g[3*r+2] = (t[r][1]+t[r][2])/2 + t[r][3]
				}
			}
		}
	})
}

// winoFilterPer is one worker's scratch in winoFilter: V, Ŷ and the
// transforms' temporaries.
func winoFilterPer(p winoPlan) int {
	return 16*p.block*(p.cin+p.cout) + 16*max(p.cin, p.cout)
}

// winoFilterScratch is winoFilter's scratch with workers workers: one dU
// (16·cin·cout) per chunk of blocks and winoFilterPer per worker.
func winoFilterScratch(p winoPlan, workers int) int {
	if p.tiles == 0 {
		return 0
	}
	return gradChunks(p.blocks)*16*p.cin*p.cout + workers*winoFilterPer(p)
}

// winoGradOutput writes Ŷ_ξ = (A·dY·Aᵀ)_ξ for the 2×2 output tiles of
// tiles t0..t1−1 into yh [16][block][cout], outputs past the grid's edge
// counting as zero; tmp holds 8·cout elements.
func winoGradOutput[T gemm.Float](yh, dy, zero, tmp []T, t0, t1 int, p winoPlan, height, width int) {
	cout := p.cout
	per := p.th * p.tw
	stride := p.block * cout
	ur := func(r, s int) []T { return tmp[(4*r+s)*cout : (4*r+s+1)*cout] }
	for t := t0; t < t1; t++ {
		b := t / per
		ti, tj := (t-b*per)/p.tw, (t-b*per)%p.tw
		base := b * height * width
		at := func(i, j int) []T {
			if i >= height || j >= width {
				return zero
			}
			tok := base + i*width + j
			return dy[tok*cout : (tok+1)*cout]
		}
		// dY·Aᵀ along each of the 2 rows, then A· down each column.
		for r := range 2 {
			a4(ur(r, 0), ur(r, 1), ur(r, 2), ur(r, 3), at(2*ti+r, 2*tj), at(2*ti+r, 2*tj+1))
		}
		k := (t - t0) * cout
		out := func(xi int) []T { return yh[xi*stride+k : xi*stride+k+cout] }
		for s := range 4 {
			a4(out(s), out(4+s), out(8+s), out(12+s), ur(0, s), ur(1, s))
		}
	}
}

// a4 is one row or column of A·dY·Aᵀ: y0, y1, y2, y3 = x0, x0 + x1,
// x0 − x1, −x1.
func a4[T gemm.Float](y0, y1, y2, y3, x0, x1 []T) {
	n := len(y0)
	y1, y2, y3, x0, x1 = y1[:n], y2[:n], y3[:n], x0[:n], x1[:n]
	for i := range n {
		a, b := x0[i], x1[i]
		y0[i], y1[i], y2[i], y3[i] = a, a+b, a-b, -b
	}
}

// winoDX computes Conv3x3Backward's dx with F(2×2, 3×3): the convolution
// of dy with w rotated by 180° and its channel axes swapped.
func winoDX[T gemm.Float](dx, dy, w []T, batch, height, width, cin, cout int, ws []T) {
	wf := ws[:9*cin*cout]
	for co := range cout {
		for c := range cin {
			src := w[(co*cin+c)*9 : (co*cin+c+1)*9]
			dst := wf[(c*cout+co)*9 : (c*cout+co+1)*9]
			for tap, v := range src {
				dst[8-tap] = v
			}
		}
	}
	winograd3x3Forward(dx, dy, wf, nil, batch, height, width, cout, cin, ws[9*cin*cout:], winoDefault)
}

// Winograd3x3Forward computes the same convolution as Conv3x3Forward (y
// [batch·height·width, cout] from x [batch·height·width, cin], w
// [cout, cin, 3, 3] in PyTorch's layout, bias [cout] or nil) with
// F(2×2, 3×3). ws holds at least Conv3x3Scratch(batch, height, width, cin,
// cout) elements.
func Winograd3x3Forward[T gemm.Float](y, x, w, bias []T, batch, height, width, cin, cout int, ws []T) {
	winograd3x3Forward(y, x, w, bias, batch, height, width, cin, cout, ws, winoDefault)
}

func winograd3x3Forward[T gemm.Float](y, x, w, bias []T, batch, height, width, cin, cout int, ws []T, z winoSizing) {
	if batch < 0 || height < 1 || width < 1 || cin < 1 || cout < 1 {
		panic(errConvDims)
	}
	checkConv(batch*height*width, cin, cout, 9, x, y, w, bias, errConvY)
	p := newWinoPlan(batch, height, width, cin, cout, z)
	if p.tiles == 0 {
		return
	}
	workers := workersFor(p.blocks)
	for workers > 1 && p.scratch(workers) > len(ws) {
		workers--
	}
	if p.scratch(workers) > len(ws) {
		panic(errConvScratch)
	}
	// U_ξ = G·g·Gᵀ for every (c, co), stored [16][cin][cout], then packed.
	u := ws[:16*cin*cout]
	winoWeights(u, w, cin, cout)
	packs := make([]gemm.PackedB[T], 16)
	pk := ws[16*cin*cout:]
	for xi := range 16 {
		packs[xi] = gemm.PackB(pk[xi*p.packLen:(xi+1)*p.packLen], false, cin, cout, u[xi*cin*cout:(xi+1)*cin*cout], cout)
	}
	free := pk[16*p.packLen:]
	zero := make([]T, max(cin, cout)) // padding, and the sink for outputs past the edge
	forItems(p.blocks, workers, func(wk, b int) {
		s := free[wk*p.perBlock : (wk+1)*p.perBlock]
		t0 := b * p.block
		t1 := min(t0+p.block, p.tiles)
		n := t1 - t0
		v, m := s[:16*p.block*cin], s[16*p.block*cin:16*p.block*(cin+cout)]
		tmp := s[16*p.block*(cin+cout):]
		winoInput(v, x, zero[:cin], tmp, t0, t1, p, height, width)
		for xi := range 16 {
			gemm.GemmPackedB(false, n, 1, v[xi*p.block*cin:], cin, packs[xi], 0, m[xi*p.block*cout:], cout)
		}
		winoOutput(y, m, bias, zero[:cout], tmp, t0, t1, p, height, width)
	})
}

// winoWeights writes U_ξ[c][co] = (G·g·Gᵀ)_ξ for g = w[co, c] into u
// [16][cin][cout].
func winoWeights[T gemm.Float](u, w []T, cin, cout int) {
	var t [4][3]T
	for co := range cout {
		for c := range cin {
			g := w[(co*cin+c)*9 : (co*cin+c+1)*9]
			// t = G·g (4×3).
			for j := range 3 {
				g0, g1, g2 := g[j], g[3+j], g[6+j]
				t[0][j] = g0
				t[1][j] = (g0 + g1 + g2) / 2
				t[2][j] = (g0 - g1 + g2) / 2
				t[3][j] = g2
			}
			// U = t·Gᵀ (4×4).
			for i := range 4 {
				r0, r1, r2 := t[i][0], t[i][1], t[i][2]
				base := (4 * i) * cin * cout
				u[base+c*cout+co] = r0
				u[base+cin*cout+c*cout+co] = (r0 + r1 + r2) / 2
				u[base+2*cin*cout+c*cout+co] = (r0 - r1 + r2) / 2
				u[base+3*cin*cout+c*cout+co] = r2
			}
		}
	}
}

// winoInput writes V_ξ[k][c] = (Bᵀ·d·B)_ξ for the 4×4 patches d of tiles
// t0..t1−1 into v [16][block][cin]; zero (cin zeros, read only) stands in
// for the padding, tmp holds 16·cin elements.
func winoInput[T gemm.Float](v, x, zero, tmp []T, t0, t1 int, p winoPlan, height, width int) {
	cin := p.cin
	per := p.th * p.tw
	stride := p.block * cin
	var d [4][4][]T
	tr := func(r, s int) []T { return tmp[(4*r+s)*cin : (4*r+s+1)*cin] }
	for t := t0; t < t1; t++ {
		b := t / per
		ti, tj := (t-b*per)/p.tw, (t-b*per)%p.tw
		base := b * height * width
		for r := range 4 {
			i := 2*ti - 1 + r
			for s := range 4 {
				j := 2*tj - 1 + s
				if i < 0 || i >= height || j < 0 || j >= width {
					d[r][s] = zero
				} else {
					tok := base + i*width + j
					d[r][s] = x[tok*cin : (tok+1)*cin]
				}
			}
		}
		// Bᵀ·d down each column, then ·B along each row into V.
		for s := range 4 {
			bt4(tr(0, s), tr(1, s), tr(2, s), tr(3, s), d[0][s], d[1][s], d[2][s], d[3][s])
		}
		k := (t - t0) * cin
		out := func(xi int) []T { return v[xi*stride+k : xi*stride+k+cin] }
		for r := range 4 {
			bt4(out(4*r), out(4*r+1), out(4*r+2), out(4*r+3), tr(r, 0), tr(r, 1), tr(r, 2), tr(r, 3))
		}
	}
}

// winoOutput writes the 2×2 outputs Aᵀ·M·A (+ bias) of tiles t0..t1−1 from
// m [16][block][cout] into y; zero holds cout zeros (read only), tmp
// 9·cout elements (the last cout absorb outputs past the grid's edge).
func winoOutput[T gemm.Float](y, m, bias, zero, tmp []T, t0, t1 int, p winoPlan, height, width int) {
	cout := p.cout
	per := p.th * p.tw
	stride := p.block * cout
	if bias == nil {
		bias = zero
	}
	bias = bias[:cout]
	ur := func(r, s int) []T { return tmp[(4*r+s)*cout : (4*r+s+1)*cout] }
	sink := tmp[8*cout : 9*cout]
	for t := t0; t < t1; t++ {
		b := t / per
		ti, tj := (t-b*per)/p.tw, (t-b*per)%p.tw
		base := b * height * width
		i0, j0 := 2*ti, 2*tj
		k := (t - t0) * cout
		in := func(xi int) []T { return m[xi*stride+k : xi*stride+k+cout] }
		at := func(i, j int) []T {
			if i >= height || j >= width {
				return sink
			}
			tok := base + i*width + j
			return y[tok*cout : (tok+1)*cout]
		}
		// Aᵀ·M down each column, then ·A along both rows, plus the bias.
		for s := range 4 {
			at4(ur(0, s), ur(1, s), in(s), in(4+s), in(8+s), in(12+s), zero)
		}
		for r := range 2 {
			at4(at(i0+r, j0), at(i0+r, j0+1), ur(r, 0), ur(r, 1), ur(r, 2), ur(r, 3), bias)
		}
	}
}

// bt4 is one row or column of the input transform:
// y0, y1, y2, y3 = x0 − x2, x1 + x2, x2 − x1, x1 − x3, element by element
// (all of y0's length).
func bt4[T gemm.Float](y0, y1, y2, y3, x0, x1, x2, x3 []T) {
	n := len(y0)
	y1, y2, y3 = y1[:n], y2[:n], y3[:n]
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	i := 0
	if winoAsm && n >= 8 && unsafe.Sizeof(y0[0]) == 4 {
		i = n &^ 7
		winoBT4AVX(f32p(y0), f32p(y1), f32p(y2), f32p(y3), f32p(x0), f32p(x1), f32p(x2), f32p(x3), i)
	}
	for ; i < n; i++ {
		y0[i], y1[i], y2[i], y3[i] = x0[i]-x2[i], x1[i]+x2[i], x2[i]-x1[i], x1[i]-x3[i]
	}
}

// at4 is one row or column of the output transform plus b:
// y0, y1 = x0 + x1 + x2 + b, x1 − x2 − x3 + b.
func at4[T gemm.Float](y0, y1, x0, x1, x2, x3, b []T) {
	n := len(y0)
	y1 = y1[:n]
	x0, x1, x2, x3, b = x0[:n], x1[:n], x2[:n], x3[:n], b[:n]
	i := 0
	if winoAsm && n >= 8 && unsafe.Sizeof(y0[0]) == 4 {
		i = n &^ 7
		winoAT4AVX(f32p(y0), f32p(y1), f32p(x0), f32p(x1), f32p(x2), f32p(x3), f32p(b), i)
	}
	for ; i < n; i++ {
		y0[i], y1[i] = x0[i]+x1[i]+x2[i]+b[i], x1[i]-x2[i]-x3[i]+b[i]
	}
}

// f32p is the address of a float32 slice's first element (T is float32
// wherever it is called).
func f32p[T gemm.Float](s []T) *float32 { return (*float32)(unsafe.Pointer(unsafe.SliceData(s))) }

package kernels

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// modShape validates a per-sample broadcast: x [rows, cols] packed by
// offsets (len S+1) and per-sample vectors [S, cols]. It returns rows.
func modShape(kernel string, n, cols int, offsets []int, perSample ...int) int {
	ewNeedDims(kernel, cols)
	rows := ewRowsOf(kernel, "x", n, cols)
	ewNeedOffsets(kernel, offsets, rows)
	for _, p := range perSample {
		ewNeedLen(kernel, "per-sample vector", p, (len(offsets)-1)*cols)
	}
	return rows
}

// modRows runs body(r, s) for every row r and its sample s, rows in
// parallel: the sample is found once per chunk and then advanced.
func modRows(offsets []int, rows, cols int, body func(lo, hi, s int)) {
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		s := ewSampleOf(offsets, lo)
		for r := lo; r < hi; {
			for r >= offsets[s+1] {
				s++
			}
			end := min(hi, offsets[s+1])
			body(r, end, s)
			r = end
		}
	})
}

// ModulateForward applies DiT's adaLN modulation y = x·(1 + scale_s) +
// shift_s to x [rows, cols] packed by offsets (len S+1), with per-sample
// shift and scale [S, cols] broadcast over each sample's rows. y may alias x.
func ModulateForward[T gemm.Float](y, x, shift, scale []T, offsets []int, cols int) {
	rows := modShape("ModulateForward", len(x), cols, offsets, len(shift), len(scale))
	ewNeedLen("ModulateForward", "y", len(y), len(x))
	modRows(offsets, rows, cols, func(lo, hi, s int) {
		sh, sc := shift[s*cols:(s+1)*cols], scale[s*cols:(s+1)*cols]
		sc = sc[:len(sh)]
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			xr, yr = xr[:len(sh)], yr[:len(sh)]
			for i := range sh {
				yr[i] = xr[i]*(1+sc[i]) + sh[i]
			}
		}
	})
}

// ModulateBackward computes the gradients of ModulateForward from dy:
// dx = dy·(1 + scale_s), dshift_s = Σ_{r in s} dy_r and
// dscale_s = Σ_{r in s} dy_r∘x_r. Any of dx, dshift, dscale may be nil.
func ModulateBackward[T gemm.Float](dx, dshift, dscale, dy, x, scale []T, offsets []int, cols int) {
	rows := modShape("ModulateBackward", len(dy), cols, offsets, len(scale))
	samples := len(offsets) - 1
	if dx != nil {
		ewNeedLen("ModulateBackward", "dx", len(dx), len(dy))
	}
	if dshift != nil {
		ewNeedLen("ModulateBackward", "dshift", len(dshift), samples*cols)
	}
	if dscale != nil {
		ewNeedLen("ModulateBackward", "dscale", len(dscale), samples*cols)
		ewNeedLen("ModulateBackward", "x", len(x), len(dy))
	}
	if dshift == nil && dscale == nil {
		if dx != nil {
			modRows(offsets, rows, cols, func(lo, hi, s int) {
				sc := scale[s*cols : (s+1)*cols]
				for r := lo; r < hi; r++ {
					dyr, dxr := dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
					dyr, dxr = dyr[:len(sc)], dxr[:len(sc)]
					for i := range sc {
						dxr[i] = dyr[i] * (1 + sc[i])
					}
				}
			})
		}
		return
	}
	// One pass over dy and x produces all three gradients, each (sample,
	// column block) owned by one worker.
	redPerSample(offsets, rows, cols, func(s, c0, c1 int) {
		sc := scale[s*cols+c0 : s*cols+c1]
		var dsh, dsc []T
		if dshift != nil {
			dsh = dshift[s*cols+c0 : s*cols+c1]
			dsh = dsh[:len(sc)]
			clear(dsh)
		}
		if dscale != nil {
			dsc = dscale[s*cols+c0 : s*cols+c1]
			dsc = dsc[:len(sc)]
			clear(dsc)
		}
		for r := offsets[s]; r < offsets[s+1]; r++ {
			dyr := dy[r*cols+c0 : r*cols+c1]
			dyr = dyr[:len(sc)]
			if dx != nil && dsh != nil && dsc != nil {
				// The training case, fused: one load of dy and x per element.
				dxr, xr := dx[r*cols+c0:r*cols+c1], x[r*cols+c0:r*cols+c1]
				dxr, xr = dxr[:len(sc)], xr[:len(sc)]
				for i, g := range dyr {
					dxr[i] = g * (1 + sc[i])
					dsh[i] += g
					dsc[i] += g * xr[i]
				}
				continue
			}
			if dx != nil {
				dxr := dx[r*cols+c0 : r*cols+c1]
				dxr = dxr[:len(sc)]
				for i := range sc {
					dxr[i] = dyr[i] * (1 + sc[i])
				}
			}
			if dsh != nil {
				for i := range sc {
					dsh[i] += dyr[i]
				}
			}
			if dsc != nil {
				xr := x[r*cols+c0 : r*cols+c1]
				xr = xr[:len(sc)]
				for i := range sc {
					dsc[i] += dyr[i] * xr[i]
				}
			}
		}
	})
}

// GatedResidualForward computes DiT's gated residual y = x + gate_s∘h for
// x, h [rows, cols] packed by offsets (len S+1) and a per-sample gate
// [S, cols]. y may alias x or h.
func GatedResidualForward[T gemm.Float](y, x, gate, h []T, offsets []int, cols int) {
	rows := modShape("GatedResidualForward", len(x), cols, offsets, len(gate))
	ewNeedLen("GatedResidualForward", "h", len(h), len(x))
	ewNeedLen("GatedResidualForward", "y", len(y), len(x))
	modRows(offsets, rows, cols, func(lo, hi, s int) {
		gs := gate[s*cols : (s+1)*cols]
		for r := lo; r < hi; r++ {
			xr, hr, yr := x[r*cols:(r+1)*cols], h[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			xr, hr, yr = xr[:len(gs)], hr[:len(gs)], yr[:len(gs)]
			for i := range gs {
				yr[i] = xr[i] + gs[i]*hr[i]
			}
		}
	})
}

// GatedResidualBackward computes the gradients of GatedResidualForward from
// dy: dx = dy, dgate_s = Σ_{r in s} dy_r∘h_r and dh = gate_s∘dy. Any of dx,
// dgate, dh may be nil (callers that can share dy's storage for dx should
// pass nil and reuse dy).
func GatedResidualBackward[T gemm.Float](dx, dgate, dh, dy, gate, h []T, offsets []int, cols int) {
	rows := modShape("GatedResidualBackward", len(dy), cols, offsets, len(gate))
	samples := len(offsets) - 1
	if dx != nil {
		ewNeedLen("GatedResidualBackward", "dx", len(dx), len(dy))
		copy(dx, dy)
	}
	if dh != nil {
		ewNeedLen("GatedResidualBackward", "dh", len(dh), len(dy))
	}
	if dgate != nil {
		ewNeedLen("GatedResidualBackward", "dgate", len(dgate), samples*cols)
		ewNeedLen("GatedResidualBackward", "h", len(h), len(dy))
	}
	if dgate == nil {
		if dh != nil {
			modRows(offsets, rows, cols, func(lo, hi, s int) {
				gs := gate[s*cols : (s+1)*cols]
				for r := lo; r < hi; r++ {
					dyr, dhr := dy[r*cols:(r+1)*cols], dh[r*cols:(r+1)*cols]
					dyr, dhr = dyr[:len(gs)], dhr[:len(gs)]
					for i := range gs {
						dhr[i] = gs[i] * dyr[i]
					}
				}
			})
		}
		return
	}
	redPerSample(offsets, rows, cols, func(s, c0, c1 int) {
		gs := gate[s*cols+c0 : s*cols+c1]
		dg := dgate[s*cols+c0 : s*cols+c1]
		dg = dg[:len(gs)]
		clear(dg)
		for r := offsets[s]; r < offsets[s+1]; r++ {
			dyr, hr := dy[r*cols+c0:r*cols+c1], h[r*cols+c0:r*cols+c1]
			dyr, hr = dyr[:len(gs)], hr[:len(gs)]
			if dh != nil {
				dhr := dh[r*cols+c0 : r*cols+c1]
				dhr = dhr[:len(gs)]
				for i, g := range dyr {
					dg[i] += g * hr[i]
					dhr[i] = gs[i] * g
				}
				continue
			}
			for i, g := range dyr {
				dg[i] += g * hr[i]
			}
		}
	})
}

// AddPerSample sets y = x + v_s, broadcasting a per-sample vector v
// [S, cols] over the rows of each sample of x [rows, cols] (offsets, len
// S+1): e.g. a timestep embedding added to every token of a conv block. y
// may alias x. Its backward is dx = dy and dv = SumRows(dy).
func AddPerSample[T gemm.Float](y, x, v []T, offsets []int, cols int) {
	rows := modShape("AddPerSample", len(x), cols, offsets, len(v))
	ewNeedLen("AddPerSample", "y", len(y), len(x))
	modRows(offsets, rows, cols, func(lo, hi, s int) {
		vs := v[s*cols : (s+1)*cols]
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			xr, yr = xr[:len(vs)], yr[:len(vs)]
			for i := range vs {
				yr[i] = xr[i] + vs[i]
			}
		}
	})
}

package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Row gathers and scatters (kernels.GatherRows, GatherRowsBackward,
// ScatterRows, ScatterRowsBackward): selecting the kept tokens of a chunked
// batch, copying each grid position's nearest kept token when de-chunking,
// and putting processed tokens back on the grid.
//
// All four are one kernel, out[r] = Σ_{k in list(r)} in[k] in list order
// (zero for an empty list): a gather has list(i) = {idx[i]}; the scatter
// and the gather's backward use the inverse index, the rows i with idx[i]
// = j in increasing i. Every output element is written by one thread that
// adds its terms in the CPU's order, so the backward scatter-add needs no
// atomics and is bit-identical to the CPU's (which zeroes dx and adds in
// order of i; 0 + a = a exactly). The inverse index is built on the host,
// where the indices come from (tail dropping and chunking in package dc
// are host-side index logic), and uploaded once with the forward one.

// RowIndex is a row index idx (len n, values in [0, rows)) and its
// inverse on the device, built once per batch and shared by the gather,
// scatter and their backward passes.
type RowIndex struct {
	n, rows int
	unique  bool
	buf     cuda.Buffer // int32: idx [n], inverse offsets [rows+1], inverse list [n]
	owned   bool        // buf is the index's own (NewRowIndex), not the caller's
	idx     cuda.Buffer
	invOffs cuda.Buffer
	invList cuda.Buffer
}

// RowIndexBytes is the device memory a RowIndex of n indices into rows
// rows takes (RowIndexIn's buffer).
func RowIndexBytes(n, rows int) int { return 4 * (2*n + rows + 1) }

// NewRowIndex checks idx against rows and uploads it with its inverse into
// memory of its own, which Free releases.
func (sc *Scaffold) NewRowIndex(idx []int, rows int) (*RowIndex, error) {
	host, unique, err := rowIndexHost(idx, rows)
	if err != nil {
		return nil, err
	}
	buf, err := cuda.Upload(sc.set.rt, host)
	if err != nil {
		return nil, fmt.Errorf("cudakernels: NewRowIndex: %w", err)
	}
	ri, err := newRowIndex(buf, len(idx), rows, unique)
	if err != nil {
		buf.Free()
		return nil, err
	}
	ri.owned = true
	return ri, nil
}

// RowIndexIn is NewRowIndex into buf, at least RowIndexBytes long, which
// the caller owns and may reuse once the kernels queued on the index have
// run (later work on the same stream runs after them): a pool's buffer,
// since cuMemFree synchronises the device and a training step builds
// several indices. Free does nothing to it.
func (sc *Scaffold) RowIndexIn(buf cuda.Buffer, idx []int, rows int) (*RowIndex, error) {
	host, unique, err := rowIndexHost(idx, rows)
	if err != nil {
		return nil, err
	}
	if buf.Len() < 4*len(host) {
		return nil, fmt.Errorf("cudakernels: RowIndexIn: a buffer of %d bytes for an index of %d", buf.Len(), 4*len(host))
	}
	sl, err := buf.Slice(0, 4*len(host))
	if err == nil {
		err = cuda.CopyFromHost(sl, host)
	}
	if err != nil {
		return nil, fmt.Errorf("cudakernels: RowIndexIn: %w", err)
	}
	return newRowIndex(sl, len(idx), rows, unique)
}

// rowIndexHost checks idx and lays out the index and its inverse as the
// device holds them: idx [n], inverse offsets [rows+1], inverse list [n].
func rowIndexHost(idx []int, rows int) (host []int32, unique bool, err error) {
	if rows < 0 || rows > 1<<31-2 || len(idx) > 1<<31-1 {
		return nil, false, fmt.Errorf("cudakernels: row index: %d indices into %d rows: sizes must fit int32", len(idx), rows)
	}
	n := len(idx)
	host = make([]int32, 2*n+rows+1)
	fwd, offs, list := host[:n], host[n:n+rows+1], host[n+rows+1:]
	unique = true
	for i, j := range idx {
		if uint(j) >= uint(rows) {
			return nil, false, fmt.Errorf("cudakernels: row index: idx[%d] = %d out of range [0, %d)", i, j, rows)
		}
		fwd[i] = int32(j)
		offs[j+1]++
		if offs[j+1] > 1 {
			unique = false
		}
	}
	for j := 0; j < rows; j++ {
		offs[j+1] += offs[j]
	}
	// Counting sort by destination, stable: each row's list is in
	// increasing i, the CPU's order of addition.
	next := append([]int32(nil), offs[:rows]...)
	for i, j := range idx {
		list[next[j]] = int32(i)
		next[j]++
	}
	return host, unique, nil
}

// newRowIndex views buf, laid out by rowIndexHost, as a RowIndex.
func newRowIndex(buf cuda.Buffer, n, rows int, unique bool) (*RowIndex, error) {
	ri := &RowIndex{n: n, rows: rows, unique: unique, buf: buf}
	var err error
	if ri.idx, err = buf.Slice(0, 4*n); err == nil {
		if ri.invOffs, err = buf.Slice(4*n, 4*(rows+1)); err == nil {
			ri.invList, err = buf.Slice(4*(n+rows+1), 4*n)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cudakernels: row index: %w", err)
	}
	return ri, nil
}

// Len is the number of indices n.
func (ri *RowIndex) Len() int { return ri.n }

// Rows is the number of rows the indices address.
func (ri *RowIndex) Rows() int { return ri.rows }

// Unique reports whether no index repeats (ScatterRows needs that).
func (ri *RowIndex) Unique() bool { return ri.unique }

// Free releases the index's device memory when it is its own
// (NewRowIndex); a RowIndexIn buffer stays the caller's.
func (ri *RowIndex) Free() error {
	if !ri.owned {
		return nil
	}
	return ri.buf.Free()
}

// gatherSum launches out[r] = Σ_{k in list(r)} in[k] over outRows rows;
// offs empty means list(r) = {list[r]}.
func (sc *Scaffold) gatherSum(kernel string, out, in, offs, list cuda.Buffer, outRows, inRows, cols int) error {
	if cols < 1 || int64(outRows)*int64(cols) > 1<<62 || int64(inRows)*int64(cols) > 1<<62 {
		return fmt.Errorf("cudakernels: %s: %d columns, want ≥ 1", kernel, cols)
	}
	if err := checkBufs(kernel, bufArg{"out", out, outRows * cols, false}, bufArg{"in", in, inRows * cols, false}); err != nil {
		return err
	}
	return sc.set.elementwise(sc.gatherK, outRows*cols, out, in, offs.Ptr(), list, int32(cols))
}

// GatherRows sets y[i, :] = x[idx[i], :] for x [ri.Rows(), cols] and y
// [ri.Len(), cols] (kernels.GatherRows). Indices may repeat.
func (sc *Scaffold) GatherRows(y, x cuda.Buffer, ri *RowIndex, cols int) error {
	if ri == nil {
		return fmt.Errorf("cudakernels: GatherRows: nil index")
	}
	return sc.gatherSum("GatherRows", y, x, cuda.Buffer{}, ri.idx, ri.n, ri.rows, cols)
}

// GatherRowsBackward sets dx [ri.Rows(), cols] to zero plus, for every i,
// dy[i, :] at row idx[i], so that rows gathered several times get the sum
// of their gradients in order of i (kernels.GatherRowsBackward).
func (sc *Scaffold) GatherRowsBackward(dx, dy cuda.Buffer, ri *RowIndex, cols int) error {
	if ri == nil {
		return fmt.Errorf("cudakernels: GatherRowsBackward: nil index")
	}
	return sc.gatherSum("GatherRowsBackward", dx, dy, ri.invOffs, ri.invList, ri.rows, ri.n, cols)
}

// ScatterRows sets y [ri.Rows(), cols] to zero except y[idx[i], :] =
// x[i, :] for x [ri.Len(), cols] (kernels.ScatterRows). The indices must
// not repeat (an error otherwise).
func (sc *Scaffold) ScatterRows(y, x cuda.Buffer, ri *RowIndex, cols int) error {
	if ri == nil {
		return fmt.Errorf("cudakernels: ScatterRows: nil index")
	}
	if !ri.unique {
		return fmt.Errorf("cudakernels: ScatterRows: the index repeats a row: which copy wins would be arbitrary")
	}
	return sc.gatherSum("ScatterRows", y, x, ri.invOffs, ri.invList, ri.rows, ri.n, cols)
}

// ScatterRowsBackward sets dx[i, :] = dy[idx[i], :] (a GatherRows;
// kernels.ScatterRowsBackward).
func (sc *Scaffold) ScatterRowsBackward(dx, dy cuda.Buffer, ri *RowIndex, cols int) error {
	if ri == nil {
		return fmt.Errorf("cudakernels: ScatterRowsBackward: nil index")
	}
	return sc.gatherSum("ScatterRowsBackward", dx, dy, cuda.Buffer{}, ri.idx, ri.n, ri.rows, cols)
}

// gatherSource is the CUDA C of this file's kernel.
const gatherSource = `
// out[r][c] = Σ_{k = offs[r]}^{offs[r+1]−1} in[list[k]][c], in order of k,
// starting from 0 (zero for an empty range); with offs null the range is
// the single entry list[r]. n = rows of out × cols.
extern "C" __global__ void rows_gather_sum(float* out, const float* in, const int* offs, const int* list, int cols, long long n) {
	for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
		long long r = e / cols;
		int c = (int)(e - r * cols);
		if (!offs) {
			out[e] = in[(long long)list[r] * cols + c];
			continue;
		}
		float acc = 0.0f;
		for (int k = offs[r]; k < offs[r + 1]; k++) acc += in[(long long)list[k] * cols + c];
		out[e] = acc;
	}
}
`

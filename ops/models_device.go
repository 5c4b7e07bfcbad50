package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/cudakernels"
	"github.com/dcdit/dcdit/gpu/device"
)

// Device variants of the ops a whole DiT or DC-DiT uses besides the
// transformer block's: norms, convolutions, row gathers and scatters,
// de-chunking, per-sample and per-row broadcasts, the straight-through
// estimator and the scalar reductions of the losses.

// colocate uploads host constants that meet device operands in one op. The
// model code builds some operands on the host each step (DiT's patches,
// timestep sinusoids and position embeddings, DC-DiT's router masks), and
// uploading them where they meet the device keeps that code unchanged. Only
// constants move: a float32 host matrix that requires no gradient. A host
// operand that does require one stays, and placement then panics as
// before, since its gradient would be lost. The upload is a new device
// tensor that returns to the pool when it becomes unreachable. ts holds
// pointers to the op's operands (nil pointers and nil operands are
// skipped); with no device operand nothing happens, so host runs do not
// change.
func colocate(op string, ts ...*mat.Tensor) {
	var d *device.Device
	for _, t := range ts {
		if t == nil || *t == nil {
			continue
		}
		// A Resident without a tensor is the dispatch tests' stand-in.
		if r, ok := (*t).Value().(device.Resident); ok && r.DeviceTensor() != nil {
			d = r.DeviceTensor().Device()
			break
		}
	}
	if d == nil {
		return
	}
	for _, t := range ts {
		if t == nil || *t == nil || (*t).RequiresGrad() {
			continue
		}
		var host []float32
		switch (*t).Value().(type) {
		case *mat.Dense[float32], *value[float32]:
			host = data[float32](*t)
		default:
			continue // on the device already, or a type placement reports
		}
		s := (*t).Shape()
		up, err := d.Upload(s[0], s[1], host)
		if err != nil {
			panic(fmt.Sprintf("ops: %s: uploading a host constant beside device operands: %v", op, err))
		}
		*t = up
	}
}

// rmsNormDevice is RMSNorm on the device; the per-row rstd is kept with
// the output.
type rmsNormDevice struct {
	rmsNorm[float32]
	rstdBuf cuda.Buffer
}

func (f *rmsNormDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("RMSNorm", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	if f.rstdBuf, err = d.Alloc(f.rows); err != nil {
		return finish("RMSNorm", y, err)
	}
	y.Keep(f.rstdBuf)
	return finish("RMSNorm", y, d.Kernels().RMSNorm(y.Buffer(), f.rstdBuf, dbuf(f.x), dbuf(f.w), f.rows, f.cols, float32(f.eps)))
}

func (f *rmsNormDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("RMSNorm", d, f.x, f.w)
	if err != nil {
		return err
	}
	if gs[0] == nil && gs[1] == nil {
		return nil
	}
	if err := d.Kernels().RMSNormBackward(gbuf(gs[0]), gbuf(gs[1]), dbuf(gy), dbuf(f.x), dbuf(f.w), f.rstdBuf, f.rows, f.cols); err != nil {
		releaseAll(gs...)
		return devErr("RMSNorm", err)
	}
	devAccGrad(f.x, gs[0])
	devAccGrad(f.w, gs[1])
	return nil
}

// groupNormDevice is GroupNorm, or GroupNormSiLU with silu set, on the
// device; the per-(sample, group) statistics are kept with the output.
type groupNormDevice struct {
	groupNorm[float32]
	silu             bool
	meanBuf, rstdBuf cuda.Buffer
}

func (f *groupNormDevice) name() string {
	if f.silu {
		return "GroupNormSiLU"
	}
	return "GroupNorm"
}

func (f *groupNormDevice) Forward() (mat.Tensor, error) {
	rows := f.batch * f.tokens
	d, y, err := newDeviceOutput(f.name(), f.x, rows, f.channels)
	if err != nil {
		return nil, err
	}
	if f.meanBuf, err = d.Alloc(f.batch * f.groups); err != nil {
		return finish(f.name(), y, err)
	}
	y.Keep(f.meanBuf)
	if f.rstdBuf, err = d.Alloc(f.batch * f.groups); err != nil {
		return finish(f.name(), y, err)
	}
	y.Keep(f.rstdBuf)
	k := d.Kernels().GroupNorm
	if f.silu {
		k = d.Kernels().GroupNormSiLU
	}
	return finish(f.name(), y, k(y.Buffer(), f.meanBuf, f.rstdBuf, dbuf(f.x), dbuf(f.w), dbuf(f.b),
		f.batch, f.tokens, f.channels, f.groups, float32(f.eps)))
}

func (f *groupNormDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads(f.name(), d, f.x, f.w, f.b)
	if err != nil {
		return err
	}
	if gs[0] == nil && gs[1] == nil && gs[2] == nil {
		return nil
	}
	if f.silu {
		err = d.Kernels().GroupNormSiLUBackward(gbuf(gs[0]), gbuf(gs[1]), gbuf(gs[2]), dbuf(gy), dbuf(f.x), f.meanBuf, f.rstdBuf,
			dbuf(f.w), dbuf(f.b), f.batch, f.tokens, f.channels, f.groups)
	} else {
		err = d.Kernels().GroupNormBackward(gbuf(gs[0]), gbuf(gs[1]), gbuf(gs[2]), dbuf(gy), dbuf(f.x), f.meanBuf, f.rstdBuf,
			dbuf(f.w), f.batch, f.tokens, f.channels, f.groups)
	}
	if err != nil {
		releaseAll(gs...)
		return devErr(f.name(), err)
	}
	devAccGrad(f.x, gs[0])
	devAccGrad(f.w, gs[1])
	devAccGrad(f.b, gs[2])
	return nil
}

// convDevice is Conv3x3 and Conv1x1 on the device (im2col and a cuBLAS
// GEMM for 3×3, a GEMM for 1×1, in the device's precision). The 3×3
// workspace comes from the pool and goes back right after the launch:
// the next user of that memory runs after the GEMM on the same stream.
type convDevice struct{ conv[float32] }

func (f *convDevice) name() string {
	if f.taps == 1 {
		return "Conv1x1"
	}
	return "Conv3x3"
}

func (f *convDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput(f.name(), f.x, f.rows, f.cout)
	if err != nil {
		return nil, err
	}
	sc := d.Scaffold()
	if f.taps == 1 {
		return finish(f.name(), y, sc.Conv1x1Forward(y.Buffer(), dbuf(f.x), dbuf(f.w), dbuf(f.b), f.rows, f.cin, f.cout, d.Precision()))
	}
	ws, err := d.Alloc(cudakernels.Conv3x3WorkspaceBytes(f.batch, f.height, f.width, f.cin, f.cout) / 4)
	if err != nil {
		return finish(f.name(), y, err)
	}
	defer d.Recycle(ws)
	return finish(f.name(), y, sc.Conv3x3Forward(y.Buffer(), dbuf(f.x), dbuf(f.w), dbuf(f.b), ws,
		f.batch, f.height, f.width, f.cin, f.cout, d.Precision()))
}

func (f *convDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads(f.name(), d, f.x, f.w, f.b)
	if err != nil {
		return err
	}
	dx, dw, db := gs[0], gs[1], gs[2]
	if dx == nil && dw == nil && db == nil {
		return nil
	}
	sc := d.Scaffold()
	if f.taps == 1 {
		err = sc.Conv1x1Backward(gbuf(dx), gbuf(dw), gbuf(db), dbuf(gy), dbuf(f.x), dbuf(f.w), f.rows, f.cin, f.cout, d.Precision())
	} else {
		var ws cuda.Buffer
		if ws, err = d.Alloc(cudakernels.Conv3x3WorkspaceBytes(f.batch, f.height, f.width, f.cin, f.cout) / 4); err == nil {
			err = sc.Conv3x3Backward(gbuf(dx), gbuf(dw), gbuf(db), dbuf(gy), dbuf(f.x), dbuf(f.w), ws,
				f.batch, f.height, f.width, f.cin, f.cout, d.Precision())
			d.Recycle(ws)
		}
	}
	if err != nil {
		releaseAll(gs...)
		return devErr(f.name(), err)
	}
	devAccGrad(f.x, dx)
	devAccGrad(f.w, dw)
	devAccGrad(f.b, db)
	return nil
}

// rowIndexFor uploads an op's row index into a buffer of the device's
// pool and ties it to the output: the buffer goes back to the pool with
// the output's memory, after the backward pass that also reads it. The
// buffer's size is rounded up to a power of two: DC-DiT's kept counts
// change every step, and the pool keeps buffers by exact size, so exact
// sizes would miss it and grow it without bound.
func rowIndexFor(op string, d *device.Device, y *device.Tensor, idx []int, rows int) (*cudakernels.RowIndex, error) {
	floats := 1
	for 4*floats < cudakernels.RowIndexBytes(len(idx), rows) {
		floats *= 2
	}
	buf, err := d.Alloc(floats)
	if err != nil {
		return nil, devErr(op, err)
	}
	ri, err := d.Scaffold().RowIndexIn(buf, idx, rows)
	if err != nil {
		d.Recycle(buf)
		return nil, devErr(op, err)
	}
	y.OnRelease(func() { d.Recycle(buf) })
	return ri, nil
}

// gatherRowsDevice is GatherRows on the device.
type gatherRowsDevice struct {
	gatherRows[float32]
	ri *cudakernels.RowIndex
}

func (f *gatherRowsDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("GatherRows", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	if f.ri, err = rowIndexFor("GatherRows", d, y, f.idx, f.xRows); err != nil {
		y.Release()
		return nil, err
	}
	return finish("GatherRows", y, d.Scaffold().GatherRows(y.Buffer(), dbuf(f.x), f.ri, f.cols))
}

func (f *gatherRowsDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("GatherRows", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	if err := d.Scaffold().GatherRowsBackward(gs[0].Buffer(), dbuf(gy), f.ri, f.cols); err != nil {
		gs[0].Release()
		return devErr("GatherRows", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

// scatterRowsDevice is ScatterRows on the device.
type scatterRowsDevice struct {
	scatterRows[float32]
	ri *cudakernels.RowIndex
}

func (f *scatterRowsDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("ScatterRows", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	if f.ri, err = rowIndexFor("ScatterRows", d, y, f.idx, f.rows); err != nil {
		y.Release()
		return nil, err
	}
	return finish("ScatterRows", y, d.Scaffold().ScatterRows(y.Buffer(), dbuf(f.x), f.ri, f.cols))
}

func (f *scatterRowsDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("ScatterRows", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	if err := d.Scaffold().ScatterRowsBackward(gs[0].Buffer(), dbuf(gy), f.ri, f.cols); err != nil {
		gs[0].Release()
		return devErr("ScatterRows", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

// deChunkDevice is DeChunk on the device. The positions go up as float64
// once per op; they, q, z and s are kept with the output.
type deChunkDevice struct {
	deChunk[float32]
	qBuf, zBuf, sBuf, posBuf cuda.Buffer
}

func (f *deChunkDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("DeChunk", f.h, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	pk, err := d.Packing(f.offsets)
	if err != nil {
		return finish("DeChunk", y, err)
	}
	for _, b := range []struct {
		dst *cuda.Buffer
		n   int
	}{{&f.qBuf, f.rows}, {&f.zBuf, f.rows}, {&f.sBuf, f.rows * f.cols}, {&f.posBuf, 4 * f.rows}} {
		if *b.dst, err = d.Alloc(b.n); err != nil {
			return finish("DeChunk", y, err)
		}
		y.Keep(*b.dst)
	}
	if err := cuda.CopyFromHost(f.posBuf, f.pos); err != nil {
		return finish("DeChunk", y, err)
	}
	return finish("DeChunk", y, d.Scaffold().DeChunkForward(y.Buffer(), f.qBuf, f.zBuf, f.sBuf, dbuf(f.h), dbuf(f.p), f.posBuf, pk,
		f.cols, f.sigma, f.clamp, 1-f.clamp))
}

func (f *deChunkDevice) Backward(gy mat.Tensor) error {
	d := dt(f.h).Device()
	pk, err := d.Packing(f.offsets)
	if err != nil {
		return devErr("DeChunk", err)
	}
	gs, err := devGrads("DeChunk", d, f.h, f.p)
	if err != nil {
		return err
	}
	if gs[0] == nil && gs[1] == nil {
		return nil
	}
	ws, err := d.Alloc(cudakernels.DeChunkWorkspaceBytes(f.rows, f.cols) / 4)
	if err == nil {
		err = d.Scaffold().DeChunkBackward(gbuf(gs[0]), gbuf(gs[1]), dbuf(gy), dbuf(f.h), dbuf(f.p), f.qBuf, f.zBuf, f.sBuf, f.posBuf, pk,
			f.cols, f.sigma, f.clamp, 1-f.clamp, ws)
		d.Recycle(ws)
	}
	if err != nil {
		releaseAll(gs...)
		return devErr("DeChunk", err)
	}
	devAccGrad(f.h, gs[0])
	devAccGrad(f.p, gs[1])
	return nil
}

// addPerSampleDevice is AddPerSample on the device.
type addPerSampleDevice struct{ addPerSample[float32] }

func (f *addPerSampleDevice) Forward() (mat.Tensor, error) {
	return addPerSampleForward("AddPerSample", f.x, f.v, f.offsets, f.rows, f.cols)
}

func (f *addPerSampleDevice) Backward(gy mat.Tensor) error {
	return addPerSampleBackward("AddPerSample", f.x, f.v, gy, f.offsets, f.cols)
}

// addPerSampleForward is x [rows, cols] + v_s on the device, op naming
// the caller in errors.
func addPerSampleForward(op string, x, v mat.Tensor, offsets []int, rows, cols int) (mat.Tensor, error) {
	d, y, err := newDeviceOutput(op, x, rows, cols)
	if err != nil {
		return nil, err
	}
	pk, err := d.Packing(offsets)
	if err != nil {
		return finish(op, y, err)
	}
	return finish(op, y, d.Models().AddPerSample(y.Buffer(), dbuf(x), dbuf(v), pk, cols))
}

// addPerSampleBackward passes gy on to x and sums it over each sample's
// rows into v's gradient.
func addPerSampleBackward(op string, x, v, gy mat.Tensor, offsets []int, cols int) error {
	d := dt(x).Device()
	if x.RequiresGrad() {
		x.AccGrad(gy) // dx = dy, passed on as is
	}
	gs, err := devGrads(op, d, v)
	if err != nil || gs[0] == nil {
		return err
	}
	pk, err := d.Packing(offsets)
	if err == nil {
		err = d.Models().SumRows(gs[0].Buffer(), dbuf(gy), pk, cols)
	}
	if err != nil {
		gs[0].Release()
		return devErr(op, err)
	}
	devAccGrad(v, gs[0])
	return nil
}

// addRowVectorDevice is AddRowVector on the device: AddPerSample's kernels
// with every row one sample's.
type addRowVectorDevice struct{ addRowVector[float32] }

func (f *addRowVectorDevice) Forward() (mat.Tensor, error) {
	return addPerSampleForward("AddRowVector", f.x, f.v, []int{0, f.rows}, f.rows, f.cols)
}

func (f *addRowVectorDevice) Backward(gy mat.Tensor) error {
	return addPerSampleBackward("AddRowVector", f.x, f.v, gy, []int{0, f.rows}, f.cols)
}

// scaleRowsDevice is ScaleRows on the device.
type scaleRowsDevice struct{ scaleRows[float32] }

func (f *scaleRowsDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("ScaleRows", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	return finish("ScaleRows", y, d.Models().ScaleRows(y.Buffer(), dbuf(f.x), dbuf(f.s), f.rows, f.cols))
}

func (f *scaleRowsDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("ScaleRows", d, f.x, f.s)
	if err != nil {
		return err
	}
	if gs[0] == nil && gs[1] == nil {
		return nil
	}
	if err := d.Models().ScaleRowsBackward(gbuf(gs[0]), gbuf(gs[1]), dbuf(gy), dbuf(f.x), dbuf(f.s), f.rows, f.cols); err != nil {
		releaseAll(gs...)
		return devErr("ScaleRows", err)
	}
	devAccGrad(f.x, gs[0])
	devAccGrad(f.s, gs[1])
	return nil
}

// steDevice is STE on the device: ones forward, the upstream gradient
// passed on as is.
type steDevice struct{ ste[float32] }

func (f *steDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("STE", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	return finish("STE", y, d.Models().Fill(y.Buffer(), 1))
}

func (f *steDevice) Backward(gy mat.Tensor) error {
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy)
	}
	return nil
}

// totalDevice is Sum, Mean and MSE on the device. The result stays there
// (a 1×1 tensor); the backward pass reads its gradient there too.
type totalDevice struct{ total[float32] }

func (f *totalDevice) name() string { return [...]string{"Sum", "Mean", "MSE"}[f.kind] }

func (f *totalDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput(f.name(), f.a, 1, 1)
	if err != nil {
		return nil, err
	}
	ws, err := d.Alloc(cudakernels.ReduceWorkspaceFloats)
	if err != nil {
		return finish(f.name(), y, err)
	}
	defer d.Recycle(ws)
	return finish(f.name(), y, d.Models().Sum(y.Buffer(), dbuf(f.a), dbuf(f.b), f.kind == totMSE, f.perElement(), ws))
}

func (f *totalDevice) Backward(gy mat.Tensor) error {
	d := dt(f.a).Device()
	if f.kind != totMSE {
		gs, err := devGrads(f.name(), d, f.a)
		if err != nil || gs[0] == nil {
			return err
		}
		if err := d.Models().FillFrom(gs[0].Buffer(), dbuf(gy), f.perElement()); err != nil {
			gs[0].Release()
			return devErr(f.name(), err)
		}
		devAccGrad(f.a, gs[0])
		return nil
	}
	gs, err := devGrads(f.name(), d, f.a, f.b)
	if err != nil {
		return err
	}
	if gs[0] == nil && gs[1] == nil {
		return nil
	}
	if err := d.Models().SquaredDiffBackward(gbuf(gs[0]), gbuf(gs[1]), dbuf(f.a), dbuf(f.b), dbuf(gy), f.perElement()); err != nil {
		releaseAll(gs...)
		return devErr(f.name(), err)
	}
	devAccGrad(f.a, gs[0])
	devAccGrad(f.b, gs[1])
	return nil
}

// meanRowsDevice is MeanRows on the device.
type meanRowsDevice struct{ meanRows[float32] }

func (f *meanRowsDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("MeanRows", f.x, len(f.offsets)-1, f.cols)
	if err != nil {
		return nil, err
	}
	pk, err := d.Packing(f.offsets)
	if err != nil {
		return finish("MeanRows", y, err)
	}
	return finish("MeanRows", y, d.Models().MeanRows(y.Buffer(), dbuf(f.x), pk, f.cols))
}

func (f *meanRowsDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("MeanRows", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	pk, err := d.Packing(f.offsets)
	if err == nil {
		err = d.Models().MeanRowsBackward(gs[0].Buffer(), dbuf(gy), pk, f.cols)
	}
	if err != nil {
		gs[0].Release()
		return devErr("MeanRows", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

package ops

import "github.com/nlpodyssey/spago/mat"

// sliceColsDevice is SliceCols on the device.
type sliceColsDevice struct{ sliceCols[float32] }

func (f *sliceColsDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("SliceCols", f.x, f.rows, f.to-f.from)
	if err != nil {
		return nil, err
	}
	return finish("SliceCols", y, d.Scaffold().SliceCols(y.Buffer(), dbuf(f.x), f.rows, f.cols, f.from, f.to))
}

func (f *sliceColsDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("SliceCols", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	if err := d.Scaffold().SliceColsBackward(gs[0].Buffer(), dbuf(gy), f.rows, f.cols, f.from, f.to); err != nil {
		gs[0].Release()
		return devErr("SliceCols", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

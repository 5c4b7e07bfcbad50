package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/device"
)

// fakeResident stands in for a device tensor on a machine without a GPU:
// dispatch looks only at device.Resident, so the seam is testable in CI.
// Its Forward would fail (there is no tensor behind it); these tests only
// build ops.
type fakeResident struct{ *mat.Dense[float32] }

func (f fakeResident) Value() mat.Tensor            { return f }
func (f fakeResident) DeviceTensor() *device.Tensor { return nil }

// operand returns a float32 [rows, cols] operand, on the (fake) device or
// on the host.
func operand(onDevice bool, rows, cols int) mat.Tensor {
	m := mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithGrad(true))
	if onDevice {
		return fakeResident{m}
	}
	return m
}

// TestDispatchByPlacement: each op with a device implementation picks it
// for device operands and exactly its host function for host ones.
func TestDispatchByPlacement(t *testing.T) {
	off := []int{0, 1, 4}
	cases := []struct {
		name      string
		build     func(dev bool) ag.AutoGradFunction
		host, dev string
	}{
		{"Linear", func(d bool) ag.AutoGradFunction {
			return newLinear(operand(d, 4, 3), operand(d, 5, 3), operand(d, 5, 1))
		}, "*ops.linear[float32]", "*ops.linearDevice"},
		{"Linear without bias", func(d bool) ag.AutoGradFunction { return newLinear(operand(d, 4, 3), operand(d, 5, 3), nil) }, "*ops.linear[float32]", "*ops.linearDevice"},
		{"Add", func(d bool) ag.AutoGradFunction { return newBinary("Add", binAdd, operand(d, 2, 3), operand(d, 2, 3)) }, "*ops.binary[float32]", "*ops.binaryDevice"},
		{"Mul", func(d bool) ag.AutoGradFunction { return newBinary("Mul", binMul, operand(d, 2, 3), operand(d, 2, 3)) }, "*ops.binary[float32]", "*ops.binaryDevice"},
		{"Scale", func(d bool) ag.AutoGradFunction { return newScale(operand(d, 2, 3), 2) }, "*ops.scale[float32]", "*ops.scaleDevice"},
		{"GELU", func(d bool) ag.AutoGradFunction { return newActivation("GELU", actGELU, operand(d, 2, 3)) }, "*ops.activation[float32]", "*ops.activationDevice"},
		{"SiLU", func(d bool) ag.AutoGradFunction { return newActivation("SiLU", actSiLU, operand(d, 2, 3)) }, "*ops.activation[float32]", "*ops.activationDevice"},
		{"LayerNorm", func(d bool) ag.AutoGradFunction { return newLayerNorm(operand(d, 4, 3), 1e-6) }, "*ops.layerNorm[float32]", "*ops.layerNormDevice"},
		{"Modulate", func(d bool) ag.AutoGradFunction {
			return newModulate(operand(d, 4, 3), operand(d, 2, 3), operand(d, 2, 3), off)
		}, "*ops.modulate[float32]", "*ops.modulateDevice"},
		{"GatedResidual", func(d bool) ag.AutoGradFunction {
			return newGatedResidual(operand(d, 4, 3), operand(d, 2, 3), operand(d, 4, 3), off)
		}, "*ops.gatedResidual[float32]", "*ops.gatedResidualDevice"},
		{"Attention", func(d bool) ag.AutoGradFunction { return newAttention(operand(d, 4, 12), off, 2) }, "*ops.attention[float32]", "*ops.attentionDevice"},
		{"SliceCols", func(d bool) ag.AutoGradFunction { return newSliceCols(operand(d, 2, 6), 2, 4) }, "*ops.sliceCols[float32]", "*ops.sliceColsDevice"},
		{"RMSNorm", func(d bool) ag.AutoGradFunction { return newRMSNorm(operand(d, 2, 3), operand(d, 3, 1), 1e-6) }, "*ops.rmsNorm[float32]", "*ops.rmsNormDevice"},
		{"GroupNorm", func(d bool) ag.AutoGradFunction {
			return newGroupNorm(operand(d, 4, 4), operand(d, 4, 1), operand(d, 4, 1), 2, 2, 1e-5)
		}, "*ops.groupNorm[float32]", "*ops.groupNormDevice"},
		{"Conv3x3", func(d bool) ag.AutoGradFunction {
			return newConv("Conv3x3", 9, operand(d, 8, 3), operand(d, 5, 27), operand(d, 5, 1), 2, 2, 2)
		}, "*ops.conv[float32]", "*ops.convDevice"},
		{"GatherRows", func(d bool) ag.AutoGradFunction { return newGatherRows(operand(d, 4, 3), []int{3, 0, 3}) }, "*ops.gatherRows[float32]", "*ops.gatherRowsDevice"},
		{"ScatterRows", func(d bool) ag.AutoGradFunction { return newScatterRows(operand(d, 2, 3), []int{3, 0}, 4) }, "*ops.scatterRows[float32]", "*ops.scatterRowsDevice"},
		{"DeChunk", func(d bool) ag.AutoGradFunction {
			return newDeChunk(operand(d, 4, 3), operand(d, 4, 1), off, make([]float64, 8), 1, 1e-4)
		}, "*ops.deChunk[float32]", "*ops.deChunkDevice"},
		{"AddPerSample", func(d bool) ag.AutoGradFunction { return newAddPerSample(operand(d, 4, 3), operand(d, 2, 3), off) }, "*ops.addPerSample[float32]", "*ops.addPerSampleDevice"},
		{"AddRowVector", func(d bool) ag.AutoGradFunction { return newAddRowVector(operand(d, 4, 3), operand(d, 1, 3)) }, "*ops.addRowVector[float32]", "*ops.addRowVectorDevice"},
		{"ScaleRows", func(d bool) ag.AutoGradFunction { return newScaleRows(operand(d, 4, 3), operand(d, 4, 1)) }, "*ops.scaleRows[float32]", "*ops.scaleRowsDevice"},
		{"STE", func(d bool) ag.AutoGradFunction { return newSTE(operand(d, 4, 1)) }, "*ops.ste[float32]", "*ops.steDevice"},
		{"MSE", func(d bool) ag.AutoGradFunction { return newTotal("MSE", totMSE, operand(d, 4, 3), operand(d, 4, 3)) }, "*ops.total[float32]", "*ops.totalDevice"},
		{"MeanRows", func(d bool) ag.AutoGradFunction { return newMeanRows(operand(d, 4, 1), off) }, "*ops.meanRows[float32]", "*ops.meanRowsDevice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprintf("%T", c.build(false)); got != c.host {
				t.Errorf("host operands: %s, want %s", got, c.host)
			}
			if got := fmt.Sprintf("%T", c.build(true)); got != c.dev {
				t.Errorf("device operands: %s, want %s", got, c.dev)
			}
		})
	}
}

// TestDispatchRefuses: mixing host and device operands, and a device
// operand of an op without a device implementation, panic naming the op
// and the operands.
func TestDispatchRefuses(t *testing.T) {
	cases := []struct {
		name  string
		build func()
		parts []string
	}{
		{"mixed Linear", func() { newLinear(operand(true, 4, 3), operand(false, 5, 3), nil) },
			[]string{"ops: Linear:", "x is on the device", "w is a *mat.Dense[float32] on the host", "device.ToDevice"}},
		{"mixed Modulate", func() { newModulate(operand(false, 4, 3), operand(false, 2, 3), operand(true, 2, 3), []int{0, 1, 4}) },
			[]string{"ops: Modulate:", "scale is on the device", "x is a *mat.Dense[float32] on the host"}},
		{"Tanh on the device", func() { newActivation("Tanh", actTanh, operand(true, 2, 3)) },
			[]string{"ops: Tanh: no device implementation yet", "x is on the device"}},
		{"HardGate on the device", func() { newHardGate(operand(true, 2, 3), 1) },
			[]string{"ops: HardGate: no device implementation yet", "z is on the device"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { mustPanic(t, c.build, c.parts...) })
	}
}

// TestColocate: host constants beside a device operand are uploaded (here
// the fake device has no memory, so the upload itself is not reached);
// host runs and host operands that require a gradient are left alone.
func TestColocate(t *testing.T) {
	a, b := operand(false, 2, 3), operand(false, 2, 3)
	ca, cb := a, b
	colocate("Add", &a, &b)
	if a != ca || b != cb {
		t.Errorf("host operands were replaced")
	}
	var none mat.Tensor
	colocate("Linear", &a, &b, &none)
	if none != nil {
		t.Errorf("a nil operand was replaced")
	}
}

package device

import (
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"
)

// The rest of mat.Matrix: every method reads or writes host data, so each
// panics (hostOnly says why and what to do). They exist only so that a
// *Tensor is a mat.Matrix, which spago's ag.Operator requires of a value.

func (*Tensor) Data() float.Slice                      { panic(hostOnly("Data")) }
func (*Tensor) Item() float.Float                      { panic(hostOnly("Item")) }
func (*Tensor) SetAt(_ mat.Tensor, _ ...int)           { panic(hostOnly("SetAt")) }
func (*Tensor) At(_ ...int) mat.Tensor                 { panic(hostOnly("At")) }
func (*Tensor) SetData(_ float.Slice)                  { panic(hostOnly("SetData")) }
func (*Tensor) ZerosLike() mat.Matrix                  { panic(hostOnly("ZerosLike")) }
func (*Tensor) OnesLike() mat.Matrix                   { panic(hostOnly("OnesLike")) }
func (*Tensor) Zeros()                                 { panic(hostOnly("Zeros")) }
func (*Tensor) SetScalar(_ float.Float, _ ...int)      { panic(hostOnly("SetScalar")) }
func (*Tensor) ScalarAt(_ ...int) float.Float          { panic(hostOnly("ScalarAt")) }
func (*Tensor) ExtractRow(_ int) mat.Matrix            { panic(hostOnly("ExtractRow")) }
func (*Tensor) ExtractColumn(_ int) mat.Matrix         { panic(hostOnly("ExtractColumn")) }
func (*Tensor) Slice(_, _, _, _ int) mat.Matrix        { panic(hostOnly("Slice")) }
func (*Tensor) Reshape(_ ...int) mat.Matrix            { panic(hostOnly("Reshape")) }
func (*Tensor) ReshapeInPlace(_ ...int) mat.Matrix     { panic(hostOnly("ReshapeInPlace")) }
func (*Tensor) Flatten() mat.Matrix                    { panic(hostOnly("Flatten")) }
func (*Tensor) FlattenInPlace() mat.Matrix             { panic(hostOnly("FlattenInPlace")) }
func (*Tensor) ResizeVector(_ int) mat.Matrix          { panic(hostOnly("ResizeVector")) }
func (*Tensor) T() mat.Matrix                          { panic(hostOnly("T")) }
func (*Tensor) TransposeInPlace() mat.Matrix           { panic(hostOnly("TransposeInPlace")) }
func (*Tensor) Add(_ mat.Matrix) mat.Matrix            { panic(hostOnly("Add")) }
func (*Tensor) AddInPlace(_ mat.Matrix) mat.Matrix     { panic(hostOnly("AddInPlace")) }
func (*Tensor) AddScalar(_ float64) mat.Matrix         { panic(hostOnly("AddScalar")) }
func (*Tensor) AddScalarInPlace(_ float64) mat.Matrix  { panic(hostOnly("AddScalarInPlace")) }
func (*Tensor) Sub(_ mat.Matrix) mat.Matrix            { panic(hostOnly("Sub")) }
func (*Tensor) SubInPlace(_ mat.Matrix) mat.Matrix     { panic(hostOnly("SubInPlace")) }
func (*Tensor) SubScalar(_ float64) mat.Matrix         { panic(hostOnly("SubScalar")) }
func (*Tensor) SubScalarInPlace(_ float64) mat.Matrix  { panic(hostOnly("SubScalarInPlace")) }
func (*Tensor) Prod(_ mat.Matrix) mat.Matrix           { panic(hostOnly("Prod")) }
func (*Tensor) ProdInPlace(_ mat.Matrix) mat.Matrix    { panic(hostOnly("ProdInPlace")) }
func (*Tensor) ProdScalar(_ float64) mat.Matrix        { panic(hostOnly("ProdScalar")) }
func (*Tensor) ProdScalarInPlace(_ float64) mat.Matrix { panic(hostOnly("ProdScalarInPlace")) }
func (*Tensor) ProdMatrixScalarInPlace(_ mat.Matrix, _ float64) mat.Matrix {
	panic(hostOnly("ProdMatrixScalarInPlace"))
}
func (*Tensor) Div(_ mat.Matrix) mat.Matrix                          { panic(hostOnly("Div")) }
func (*Tensor) DivInPlace(_ mat.Matrix) mat.Matrix                   { panic(hostOnly("DivInPlace")) }
func (*Tensor) Mul(_ mat.Matrix) mat.Matrix                          { panic(hostOnly("Mul")) }
func (*Tensor) MulT(_ mat.Matrix) mat.Matrix                         { panic(hostOnly("MulT")) }
func (*Tensor) DotUnitary(_ mat.Matrix) mat.Matrix                   { panic(hostOnly("DotUnitary")) }
func (*Tensor) ClipInPlace(_, _ float64) mat.Matrix                  { panic(hostOnly("ClipInPlace")) }
func (*Tensor) Maximum(_ mat.Matrix) mat.Matrix                      { panic(hostOnly("Maximum")) }
func (*Tensor) Minimum(_ mat.Matrix) mat.Matrix                      { panic(hostOnly("Minimum")) }
func (*Tensor) Abs() mat.Matrix                                      { panic(hostOnly("Abs")) }
func (*Tensor) Pow(_ float64) mat.Matrix                             { panic(hostOnly("Pow")) }
func (*Tensor) Sqrt() mat.Matrix                                     { panic(hostOnly("Sqrt")) }
func (*Tensor) Log() mat.Matrix                                      { panic(hostOnly("Log")) }
func (*Tensor) Exp() mat.Matrix                                      { panic(hostOnly("Exp")) }
func (*Tensor) Sigmoid() mat.Matrix                                  { panic(hostOnly("Sigmoid")) }
func (*Tensor) Sum() mat.Matrix                                      { panic(hostOnly("Sum")) }
func (*Tensor) Max() mat.Matrix                                      { panic(hostOnly("Max")) }
func (*Tensor) Min() mat.Matrix                                      { panic(hostOnly("Min")) }
func (*Tensor) ArgMax() int                                          { panic(hostOnly("ArgMax")) }
func (*Tensor) Softmax() mat.Matrix                                  { panic(hostOnly("Softmax")) }
func (*Tensor) CumSum() mat.Matrix                                   { panic(hostOnly("CumSum")) }
func (*Tensor) Range(_, _ int) mat.Matrix                            { panic(hostOnly("Range")) }
func (*Tensor) SplitV(_ ...int) []mat.Matrix                         { panic(hostOnly("SplitV")) }
func (*Tensor) Augment() mat.Matrix                                  { panic(hostOnly("Augment")) }
func (*Tensor) SwapInPlace(_, _ int) mat.Matrix                      { panic(hostOnly("SwapInPlace")) }
func (*Tensor) PadRows(_ int) mat.Matrix                             { panic(hostOnly("PadRows")) }
func (*Tensor) PadColumns(_ int) mat.Matrix                          { panic(hostOnly("PadColumns")) }
func (*Tensor) AppendRows(_ ...mat.Matrix) mat.Matrix                { panic(hostOnly("AppendRows")) }
func (*Tensor) Norm(_ float64) mat.Matrix                            { panic(hostOnly("Norm")) }
func (*Tensor) Normalize2() mat.Matrix                               { panic(hostOnly("Normalize2")) }
func (*Tensor) Apply(_ func(r, c int, v float64) float64) mat.Matrix { panic(hostOnly("Apply")) }
func (*Tensor) ApplyInPlace(_ func(r, c int, v float64) float64, _ mat.Matrix) mat.Matrix {
	panic(hostOnly("ApplyInPlace"))
}
func (*Tensor) ApplyWithAlpha(_ func(r, c int, v float64, alpha ...float64) float64, _ ...float64) mat.Matrix {
	panic(hostOnly("ApplyWithAlpha"))
}
func (*Tensor) ApplyWithAlphaInPlace(_ func(r, c int, v float64, alpha ...float64) float64, _ mat.Matrix, _ ...float64) mat.Matrix {
	panic(hostOnly("ApplyWithAlphaInPlace"))
}
func (*Tensor) DoNonZero(_ func(r, c int, v float64))     { panic(hostOnly("DoNonZero")) }
func (*Tensor) DoVecNonZero(_ func(i int, v float64))     { panic(hostOnly("DoVecNonZero")) }
func (*Tensor) Clone() mat.Matrix                         { panic(hostOnly("Clone")) }
func (*Tensor) Copy(_ mat.Matrix)                         { panic(hostOnly("Copy")) }
func (*Tensor) NewMatrix(_ ...mat.OptionsFunc) mat.Matrix { panic(hostOnly("NewMatrix")) }
func (*Tensor) NewConcatV(_ ...mat.Matrix) mat.Matrix     { panic(hostOnly("NewConcatV")) }
func (*Tensor) NewStack(_ ...mat.Matrix) mat.Matrix       { panic(hostOnly("NewStack")) }

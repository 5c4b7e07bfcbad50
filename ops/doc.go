// Package ops holds dcdit's differentiable operations: spago autograd
// functions over whole token-major matrices, computed by the fused kernels
// of package kernels.
//
// # Conventions
//
// Activations are 2-D matrices [tokens, features]; the tokens of all
// samples are packed together and sample s owns rows offsets[s] ≤ r <
// offsets[s+1] (offsets has length S+1, starts at 0 and ends at the row
// count). Per-sample vectors (adaLN shift, scale, gate) are [S, features].
// Vectors such as biases and norm weights may be [n, 1] or [1, n]; their
// gradients take the operand's own shape. Every operand of one op has the
// same element type, float32 (training) or float64 (gradient checks).
//
// Shapes are checked when the op is built: a mismatch is a caller bug and
// panics with "ops: <Op>: ..." naming the operand, the expected and the
// found shape. (spago turns an error returned from Forward into log.Fatal,
// so Forward never has anything left to reject.)
//
// # The pattern
//
// One op is one graph node over whole matrices, never one node per token.
// Each op is three pieces, in a file of its own beside its test:
//
//	// Linear returns y = x·Wᵀ + b ...
//	func Linear(x, w, b mat.Tensor) mat.Tensor { return run(newLinear(x, w, b)) }
//
//	// newLinear validates shapes and non-tensor arguments (copying slices
//	// such as offsets, which the caller may reuse), then picks the element
//	// type: pick(op, &linear[float32]{...}, &linear[float64]{...}, operands...).
//	func newLinear(x, w, b mat.Tensor) ag.AutoGradFunction
//
//	// linear[T] holds the operands, the dimensions and whatever the
//	// backward pass needs from the forward one (LayerNorm's mean and rstd).
//	type linear[T float.DType] struct{ ... }
//	func (f *linear[T]) Operands() []mat.Tensor      // optional operands (nil bias) left out
//	func (f *linear[T]) Forward() (mat.Tensor, error) // kernels.LinearForward into a new output
//	func (f *linear[T]) Backward(gy mat.Tensor) error // kernels.LinearBackward, then AccGrad
//
// Backward asks each operand whether it RequiresGrad, passes nil to the
// kernel for those that do not (so their gradient is never computed), and
// calls AccGrad exactly once for each one that does. The gradients are computed into pooled
// buffers (gradBuffer); an op's result (value.go) adopts the first one it
// receives and adds later ones into it, and any other operand (a
// parameter, a caller's matrix) copies or adds it, after which the buffer
// goes back to the pool. A gradient equal to the upstream one (Add, the
// residual of GatedResidual) is passed on as is. Results and saved state
// come from the same pool, and Release returns a finished graph's buffers
// to it, so that steady-state training steps allocate almost nothing.
// Back-propagate with this package's Backward, not spago's ag.Backward:
// it visits the nodes in a fixed order, so that gradients are summed in
// the same order in every run.
//
// Attention and convolution ops follow the same pattern over
// kernels.AttentionForward/Backward and kernels.Conv3x3Forward/Backward.
//
// LinearBF16 is the one op outside it: an inference-only Linear over a
// constant bfloat16 weight (BF16Matrix, half the bytes of float32), computed
// eagerly, with no graph node and no backward pass.
//
// # Device operands
//
// An op whose operands are GPU tensors (package gpu/device) runs on the
// GPU: its constructor calls pickOn instead of pick, with a third
// candidate, a float32 type in a *_device.go file that embeds the host
// op's struct and replaces Forward and Backward with calls to package
// gpu/cudakernels. Its result is a deviceValue (device.go), whose memory goes
// back to the device's pool on Release. Code above ops does not change:
// the same calls build the same graph, and Backward walks it the same way.
// All operands of an op must live in the same place; a host operand beside
// a device one, or a device operand of an op without a device
// implementation, panics naming the op and the operand. One exception
// keeps model code unchanged: a host constant (a float32 matrix that
// requires no gradient) beside a device operand of Linear, Add, Sub, Mul,
// ScaleRows, AddPerSample or MSE is uploaded where it meets it (colocate).
// A device op's result answers mat.Data with a host copy, for reads at the
// edge such as DC-DiT's router threshold.
package ops

// Package device holds tensors that live in GPU memory, for the ops layer,
// and parameter sets held there (Arena) with the optimiser over them.
//
// A Tensor is a row-major float32 matrix in a cuda.Buffer that implements
// spago's mat.Matrix, so that it travels through ops, spago's ag.Operator
// and ops.Backward like a host matrix: code above ops builds the same
// graph whatever its operands' residence, and ops picks the device
// implementation of an op when its operands are device tensors.
//
// Why a package of its own, below ops and beside cudakernels: the tensor
// is storage, not an op. ops imports it to dispatch and to make results;
// the trainer and the commands import it to move parameters and batches
// (ToDevice, ToHost). It imports cuda and cudakernels (its gradients are
// accumulated with the device's Add), params and optim (an Arena binds a
// params.Set), and never ops, so the kernels stay free of spago and the
// graph machinery stays in ops.
//
// # What lives where
//
// Only the graph methods of mat.Tensor and mat.Matrix are implemented:
// Shape, Dims, Size, Value, Grad, HasGrad, RequiresGrad, SetRequiresGrad,
// AccGrad, ZeroGrad, NewScalar (a device scalar: ops.Backward seeds a
// scalar root with it) and String. Every method that reads or writes host
// data (Data, Item, At, Add, Mul, Clone, …) panics with a message that
// names the method and says to copy with ToHost: such a call is a bug in
// an op or in the caller (an op without a device implementation reached
// by a device operand), and a silent download inside a training loop
// would hide it behind a slowdown. Copies between host and device happen
// only in ToDevice, Upload and ToHost, at the edges.
//
// # Memory
//
// A Device keeps freed buffers for reuse, by exact size (sizes repeat op
// after op and step after step), because cuMemFree synchronises the whole
// device; it keeps at most Options.PoolBytes, and empties the pool when
// that is passed or an allocation fails for lack of memory, because a DC
// model's changing kept-token counts free buffers of sizes that may never
// come back. All work runs in order on the runtime's one stream, so a buffer
// handed back while kernels that read it are still queued is safe to hand
// out again: the next writer runs after them. A tensor's buffers (its
// values, the state an op kept with it, its gradient) return to the pool
// on Release, or when the garbage collector finds the tensor unreachable
// (inference results that nobody releases). Views (Device.View) over
// memory the caller owns, such as a parameter arena, are never recycled.
//
// # Parameters
//
// An Arena holds a params.Set on the device: its values and gradients as
// two flat buffers in the set's layout, every parameter bound to views of
// them (params.Param.Bind), so that model code keeps calling Set.Get and
// its ops see device tensors.
package device

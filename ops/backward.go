package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/device"
)

// Backward back-propagates from root through the graph of ops behind it,
// accumulating gradients into every operand that requires one, as spago's
// ag.Backward does: root's gradient is the one already accumulated into
// it, or 1 when it is a scalar without one.
//
// Unlike ag.Backward, which runs each node's backward pass in a goroutine
// of its own as soon as its gradient is complete, Backward runs them one
// at a time, consumers before operands, in the reverse order of a
// depth-first walk of the operands. A node that three or more ops consume
// then receives their gradients in the same order every time; under
// spago's scheduling the order, and so the float sums, changed from run to
// run with the machine's load, and a training run could not be repeated
// or resumed bit for bit. The kernels are parallel themselves, so running
// nodes one at a time costs nothing measurable.
func Backward(root mat.Tensor) error {
	o, ok := root.(*ag.Operator)
	if !ok || !o.RequiresGrad() {
		return nil
	}
	if o.Value().Grad() == nil {
		if o.Value().Size() != 1 {
			return fmt.Errorf("ops: backward: the root %v has no gradient and is not a scalar", o.Value().Shape())
		}
		o.AccGrad(o.Value().(mat.Matrix).NewScalar(1))
	}
	order := postOrder(o)
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		g := n.Value().Grad()
		if g == nil {
			continue
		}
		fn := recordedFn(n)
		if fn == nil {
			return fmt.Errorf("ops: backward: a %T node of another library in the graph", n.Value())
		}
		if err := fn.Backward(g); err != nil {
			return err
		}
	}
	return nil
}

// postOrder lists the nodes under root that require a gradient, each after
// all of its operands (a depth-first post-order, operands in their order).
func postOrder(root *ag.Operator) []*ag.Operator {
	type frame struct {
		o    *ag.Operator
		next int // the next operand to visit
	}
	var order []*ag.Operator
	seen := map[*ag.Operator]bool{root: true}
	stack := []frame{{o: root}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		operands := top.o.Operands()
		if top.next < len(operands) {
			c, ok := operands[top.next].(*ag.Operator)
			top.next++
			if ok && !seen[c] && c.RequiresGrad() {
				seen[c] = true
				stack = append(stack, frame{o: c})
			}
			continue
		}
		order = append(order, top.o)
		stack = stack[:len(stack)-1]
	}
	return order
}

// recordedFn is the function that computed n, as node recorded it in n's
// value; nil for a node that node did not make.
func recordedFn(n *ag.Operator) ag.AutoGradFunction {
	switch v := n.Value().(type) {
	case *value[float32]:
		return v.fn
	case *value[float64]:
		return v.fn
	case *deviceValue:
		return v.fn
	}
	return nil
}

// node runs f as a graph node whose value records f, for Backward.
func node(f ag.AutoGradFunction) mat.Tensor { return ag.NewOperator(recorder{f}).Run() }

// recorder is an op's function whose Forward wraps the result in an ops
// value that records the function (ag.Operator does not expose it).
type recorder struct{ ag.AutoGradFunction }

func (r recorder) Forward() (mat.Tensor, error) {
	y, err := r.AutoGradFunction.Forward()
	if err != nil {
		return nil, err
	}
	switch v := y.(type) {
	case *value[float32]:
		v.fn = r.AutoGradFunction
	case *value[float64]:
		v.fn = r.AutoGradFunction
	case *deviceValue:
		v.fn = r.AutoGradFunction
	case *mat.Dense[float32]:
		return &value[float32]{Dense: v, fn: r.AutoGradFunction}, nil
	case *mat.Dense[float64]:
		return &value[float64]{Dense: v, fn: r.AutoGradFunction}, nil
	default:
		return nil, fmt.Errorf("ops: %T returned a %T", r.AutoGradFunction, y)
	}
	return y, nil
}

// BackwardFrom back-propagates from root with the upstream gradient grad
// (root's shape, row-major) given on the host: a loss computed outside
// the graph, such as the diffusion process's. Callers need not know where
// the model ran: on a device the gradient enters as the constant of
// Sum(root ⊙ grad), whose gradient with respect to root is grad exactly,
// through the device ops' tested scalar-root path.
func BackwardFrom(root mat.Tensor, grad []float32) error {
	s := root.Shape()
	if len(s) != 2 || s[0]*s[1] != len(grad) {
		return fmt.Errorf("ops: backward: %d gradient values for a root of shape %v", len(grad), s)
	}
	g := mat.NewDense[float32](mat.WithShape(s[0], s[1]), mat.WithBacking(grad))
	if _, ok := root.Value().(device.Resident); ok {
		return Backward(Sum(Mul(root, g)))
	}
	root.AccGrad(g)
	return Backward(root)
}

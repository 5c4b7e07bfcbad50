package inception

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// maxListed caps how many names one load error lists.
const maxListed = 8

// Load reads the network from path: pytorch-fid's published
// pt_inception-2015-12-05-6726825d.pth (a PyTorch state dict, zip or legacy,
// read without executing its pickle) or a safetensors file with the same
// tensor names, in F32, F16 or BF16. Every tensor of the state dict must be
// there with its exact shape and finite values; the BatchNorm
// num_batches_tracked counters are accepted and ignored, any other tensor
// is refused. Each BatchNorm is folded into its convolution (in float64,
// stored as float32).
func Load(path string) (*Net, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inception: %w", err)
	}
	defer ck.Close()
	want := expectedTensors()
	known := make(map[string]bool, len(want))
	var missing, problems []string
	for _, e := range want {
		known[e.name] = true
		t, ok := ck.Tensor(e.name)
		switch {
		case !ok:
			missing = append(missing, e.name)
		case !equalShape(t.Shape, e.shape):
			problems = append(problems, fmt.Sprintf("tensor %q: shape %v, want %v", e.name, t.Shape, e.shape))
		case t.DType != dtype.F32 && t.DType != dtype.F16 && t.DType != dtype.BF16:
			problems = append(problems, fmt.Sprintf("tensor %q: dtype %s, want F32, F16 or BF16", e.name, t.DType))
		}
	}
	counters := map[string]bool{}
	for _, c := range allConvs() {
		counters[c.name+".bn.num_batches_tracked"] = true
	}
	var unexpected []string
	for _, t := range ck.Tensors {
		switch {
		case known[t.Name]:
		case counters[t.Name]:
			if !t.DType.IsInt() || t.NumElements() != 1 {
				problems = append(problems, fmt.Sprintf("tensor %q: %s %v, want a single integer", t.Name, t.DType, t.Shape))
			}
		default:
			unexpected = append(unexpected, t.Name)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing "+capList(missing))
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		problems = append(problems, "unexpected "+capList(unexpected))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("inception: %s: %s", path, capJoin(problems))
	}
	params := make(map[string][]float32, len(want))
	for _, e := range want {
		t, _ := ck.Tensor(e.name)
		v := make([]float32, t.NumElements())
		if err := t.DecodeFloat32(v); err != nil {
			return nil, fmt.Errorf("inception: %w", err)
		}
		if err := checkValues(e.name, v); err != nil {
			return nil, fmt.Errorf("inception: %s: %w", path, err)
		}
		params[e.name] = v
	}
	return build(params), nil
}

// checkValues refuses non-finite parameters and negative variances, which
// would turn every feature into NaN.
func checkValues(name string, v []float32) error {
	variance := strings.HasSuffix(name, ".running_var")
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("tensor %q: element %d is %g, want a finite value", name, i, x)
		}
		if variance && x < 0 {
			return fmt.Errorf("tensor %q: element %d is %g, want a variance ≥ 0", name, i, x)
		}
	}
	return nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// capList joins names, listing at most maxListed of them.
func capList(names []string) string {
	q := make([]string, 0, min(len(names), maxListed))
	for _, n := range names[:min(len(names), maxListed)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	s := strings.Join(q, ", ")
	if len(names) > maxListed {
		s += fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return s
}

// capJoin joins problems, listing at most maxListed of them.
func capJoin(problems []string) string {
	s := strings.Join(problems[:min(len(problems), maxListed)], "; ")
	if len(problems) > maxListed {
		s += fmt.Sprintf("; and %d more problems", len(problems)-maxListed)
	}
	return s
}

// conv is one BasicConv2d with its BatchNorm folded in: weights in
// PyTorch's [cout][cin][kh][kw] order and a bias.
type conv struct {
	convSpec
	w, b []float32
}

// fold folds the BatchNorm of c into its convolution:
// w' = w·γ/√(var+eps), b' = β − mean·γ/√(var+eps).
func fold(c convSpec, params map[string][]float32) *conv {
	w := params[c.name+".conv.weight"]
	gamma, beta := params[c.name+".bn.weight"], params[c.name+".bn.bias"]
	mean, variance := params[c.name+".bn.running_mean"], params[c.name+".bn.running_var"]
	per := c.cin * c.kh * c.kw
	out := &conv{convSpec: c, w: make([]float32, len(w)), b: make([]float32, c.cout)}
	for o := range c.cout {
		s := float64(gamma[o]) / math.Sqrt(float64(variance[o])+bnEps)
		for i, x := range w[o*per : (o+1)*per] {
			out.w[o*per+i] = float32(float64(x) * s)
		}
		out.b[o] = float32(float64(beta[o]) - float64(mean[o])*s)
	}
	return out
}

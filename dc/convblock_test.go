package dc

import (
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
)

const (
	forwardTol = 5e-5
	gradTol    = 5e-4
)

func cfgInt(t *testing.T, c fixtures.Case, key string) int {
	t.Helper()
	v, ok := c.Int(key)
	if !ok {
		t.Fatalf("%s: config.json has no integer %q", c.Name, key)
	}
	return v
}

func check(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	e := fixtures.RelErr(got, want)
	if e > tol {
		t.Errorf("%s: err %.3g > %g", name, e, tol)
	} else {
		t.Logf("%s: err %.3g", name, e)
	}
}

func dense(rows, cols int, data []float32, grad bool) *mat.Dense[float32] {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(data), mat.WithGrad(grad))
}

func values(x mat.Tensor) []float32 { return mat.Data[float32](x.Value()) }

// The conv block matches HNetConvBlock with active conditioning: forward,
// the conditioning projection, conv1's output, and the gradients of
// S = Σ out·R for the input, the conditioning and the parameters.
func TestFixtureConvBlock(t *testing.T) {
	fixtures.Run(t, "dcdit-convblock", func(t *testing.T, c fixtures.Case) {
		in, out, cond := cfgInt(t, c, "input_dim"), cfgInt(t, c, "output_dim"), cfgInt(t, c, "cond_dim")
		g := grid{batch: cfgInt(t, c, "batch"), rows: cfgInt(t, c, "num_rows"), cols: cfgInt(t, c, "num_cols")}
		groups := cfgInt(t, c, "groupnorm_groups")
		ws, err := ReadSafetensors(c.Dir + "/weights.safetensors")
		if err != nil {
			t.Fatal(err)
		}
		params, err := NewParams(ws, convBlockShapes(in, out, cond), "conv block")
		if err != nil {
			t.Fatal(err)
		}
		if len(params.List()) != len(ws) {
			t.Fatalf("%d parameters expected, the file holds %d", len(params.List()), len(ws))
		}
		io := c.Open(t, "io.safetensors")
		N := g.batch * g.tokens()
		x := dense(N, in, io.F32("x"), true)
		cv := dense(g.batch, cond, io.F32("cond"), true)
		y := convBlock(params, "", x, cv, g, groups)
		check(t, "out", values(y), io.F32("out"), forwardTol)

		inner := min(in, out)
		temb := ops.Linear(ops.SiLU(cv), params.Get("cond_proj.1.weight"), params.Get("cond_proj.1.bias"))
		check(t, "temb", values(temb), io.F32("temb"), forwardTol)
		h := g.conv3x3(ops.SiLU(ops.GroupNorm(x, params.Get("norm1.weight"), params.Get("norm1.bias"), g.batch, groups, GroupNormEps)), params.Get("conv1.weight"), params.Get("conv1.bias"))
		check(t, "conv1_out", FromTokens(values(h), g.batch, inner, g.rows, g.cols), io.F32("conv1_out"), forwardTol)

		S := ops.Sum(ops.Mul(y, dense(N, out, io.F32("R"), false)))
		check(t, "S", values(S), io.F32("S"), forwardTol)
		if err := ops.Backward(S); err != nil {
			t.Fatal(err)
		}
		check(t, "grad.x", mat.Data[float32](x.Grad()), io.F32("grad.x"), gradTol)
		check(t, "grad.cond", mat.Data[float32](cv.Grad()), io.F32("grad.cond"), gradTol)
		for _, name := range []string{"cond_proj.1.bias", "cond_proj.1.weight", "conv2.bias", "norm1.weight", "norm2.bias", "norm2.weight", "skip_proj.bias", "skip_proj.weight"} {
			check(t, "grad."+name, params.Get(name).Gradient(), io.F32("grad."+name), gradTol)
		}
	})
}

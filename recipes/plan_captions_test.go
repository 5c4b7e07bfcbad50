package recipes

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// zimageRecipe grafts the paper's scaffold onto the Z-Image at base for
// 1024² images, distils and finetunes it, and evaluates Turbo's 8 steps.
const zimageRecipe = `name = "z"
[base]
path = "transformer"
latent_size = 128
[diffusion]
process = "flow_matching"
[scaffold]
encoder_init = "patch"
[data]
source = "shapes"
captions = true
[[stage]]
kind = "distill"
steps = 5000
batch_size = 32
[eval]
rho = [0.0, 0.6]
sampling_steps = 8
cfg = 1.0
`

// A recipe on a full-size Z-Image-Turbo (headers only) plans: the base's
// 6.15 G parameters copied, a scaffold on the 128×128 grid, the base's
// 453 TFLOPs per 1024² image over 8 steps (README, dcdit flops), the DC
// model dearer at ρ = 0 and cheaper at 0.6, a memory estimate; and the
// options a Z-Image graft refuses are named by their keys.
func TestPlanZImage(t *testing.T) {
	dir := t.TempDir()
	zc := testckpt.ZImageTurbo()
	base := filepath.Join(dir, "transformer")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := testckpt.WriteSparseSharded(base, "diffusion_pytorch_model", arch.ExpectedZImage(zc, arch.Diffusers), dtype.F32, 10_000_000_000); err != nil {
		t.Fatal(err)
	}
	write := func(text string) string {
		p := filepath.Join(dir, "recipe.toml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, pl, err := Check(write(zimageRecipe), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Backbone.Config == nil || pl.DC == nil || pl.DC.GridRows != 128 || pl.DC.ModelDim != zc.Dim || pl.DC.CondDim != zc.AdaLNDim {
		t.Fatalf("backbone %+v, scaffold %+v", pl.Backbone, pl.DC)
	}
	ps := pl.Parameters
	if !(ps.Copied == ps.Base && ps.Base > 6.1e9 && ps.Base < 6.2e9 && ps.New > 0 && len(ps.DroppedNames) == 2) {
		t.Fatalf("parameters %+v", ps)
	}
	rows := pl.FLOPs.Rows
	if len(rows) != 4 || rows[0].Model != "base" || rows[3].Model != "dc-lite-cfg" || !(math.Abs(rows[0].TFLOPsPerImage-453.05) < 0.01) {
		t.Fatalf("FLOPs rows %+v, want the base at 453.05 TFLOPs per image, two ρ rows and Lite-CFG", rows)
	}
	if !(rows[1].RelativeToBase > 1 && rows[2].RelativeToBase < 0.6) {
		t.Fatalf("DC at ρ 0 / 0.6: %.3f / %.3f of the base", rows[1].RelativeToBase, rows[2].RelativeToBase)
	}
	// Dense steps (below eval.dense_below, on flow matching's σ·T) cost
	// the whole grid, or the teacher's pass with eval.dense_teacher; the
	// base row is the same either way. Turbo's 8 steps at shift 3:
	// σ·1000 = 1000, 954, …, 316, so t < 800 takes the last 4.
	dense := strings.Replace(zimageRecipe, "cfg = 1.0\n", "cfg = 1.0\ndense_below = 800.0\n", 1)
	_, dpl, err := Check(write(dense), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dpl.FLOPs.KeptTokens, "the 4 of 8 steps below t = 800") {
		t.Errorf("kept tokens with dense_below 800: %q, want the 4 of 8 steps counted", dpl.FLOPs.KeptTokens)
	}
	scaffold := strings.Replace(dense, "encoder_init = \"patch\"\n", "encoder_init = \"patch\"\nhead = \"wide\"\n", 1)
	_, spl, err := Check(write(scaffold), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, tpl, err := Check(write(strings.Replace(scaffold, "cfg = 1.0\n", "cfg = 1.0\ndense_teacher = true\n", 1)), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range dpl.FLOPs.Rows {
		switch {
		case row.Model == "base" && (row.TFLOPsPerImage != rows[0].TFLOPsPerImage || tpl.FLOPs.Rows[i].TFLOPsPerImage != rows[0].TFLOPsPerImage):
			t.Errorf("base: %.5g TFLOP per image with dense steps, %.5g without", row.TFLOPsPerImage, rows[0].TFLOPsPerImage)
		case row.Model == "dc" && !(row.Rho <= 0) && !(row.TFLOPsPerImage > rows[i].TFLOPsPerImage):
			t.Errorf("ρ %g: %.5g TFLOP per image with 4 dense steps, %.5g without, want it dearer", row.Rho, row.TFLOPsPerImage, rows[i].TFLOPsPerImage)
		case row.Model != "base" && !(tpl.FLOPs.Rows[i].TFLOPsPerImage < spl.FLOPs.Rows[i].TFLOPsPerImage):
			t.Errorf("%s at ρ %g: %.5g TFLOP per image with the dense steps as the teacher, %.5g without", row.Model, row.Rho, tpl.FLOPs.Rows[i].TFLOPsPerImage, spl.FLOPs.Rows[i].TFLOPsPerImage)
		}
	}
	m := pl.Stages[0].Memory
	if pl.Stages[0].Trainable != ps.New || !(m.Teacher == 4*ps.Base && m.Activations > 0 && m.Total > m.Teacher) {
		t.Fatalf("stage %+v", pl.Stages[0])
	}

	// What the planner refuses, each named by its key.
	for _, tt := range []struct{ cut, key string }{
		{"latent_size = 128\n", "base.latent_size"},
		{"[diffusion]\nprocess = \"flow_matching\"\n", "diffusion.process"},
	} {
		if _, _, err := Check(write(strings.Replace(zimageRecipe, tt.cut, "", 1)), LoadOptions{}); err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: err = %v, want it named", tt.key, err)
		}
	}
}

// A Z-Image trained from scratch plans as one: its own parameters, its
// FLOPs along the sampling run, flow matching's loss, and the stages'
// compute, which grow with the model.
func TestPlanZImageModel(t *testing.T) {
	text := func(dim int) string {
		return fmt.Sprintf("name = \"z\"\n[model]\nkind = \"zimage\"\ndepth = 2\nhidden_size = %d\nnum_heads = 2\ninput_size = 16\n[data]\nsamples = 8\n[[stage]]\nkind = \"train\"\nsteps = 10\nbatch_size = 4\n", dim)
	}
	var params []int64
	var compute []float64
	for _, dim := range []int{32, 64} {
		r, err := Parse("z.toml", text(dim), t.TempDir(), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := NewPlan(r)
		if err != nil {
			t.Fatal(err)
		}
		bc, _ := pl.Backbone.Config.(*arch.ZImageConfig)
		if pl.Recipe.Kind != "train-zimage" || bc == nil || bc.Dim != dim {
			t.Fatalf("kind %q, backbone %+v", pl.Recipe.Kind, pl.Backbone)
		}
		want := int64(0)
		exp := arch.ExpectedZImage(bc, arch.Comfy)
		for i := range exp.Names() {
			n := int64(1)
			for _, d := range exp.Shape(i) {
				n *= d
			}
			want += n
		}
		if pl.Parameters.Total != want {
			t.Errorf("D %d: %d parameters, want the Z-Image's %d", dim, pl.Parameters.Total, want)
		}
		if len(pl.FLOPs.Rows) != 1 || !(pl.FLOPs.Rows[0].GFLOPsPerForward > 0) {
			t.Errorf("D %d: FLOPs rows %+v", dim, pl.FLOPs.Rows)
		}
		if len(pl.Stages) != 1 || pl.Stages[0].Loss != ProcessFlowMatching {
			t.Fatalf("D %d: stages %+v", dim, pl.Stages)
		}
		params, compute = append(params, pl.Parameters.Total), append(compute, pl.Stages[0].PFLOPsTotal)
	}
	if !(params[1] > params[0] && compute[1] > compute[0]) {
		t.Errorf("parameters %v and compute %v do not grow with the width", params, compute)
	}
}

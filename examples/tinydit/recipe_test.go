package tinydit_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/upcycle"
)

// recipePath is the example's recipe: it upcycles the teacher file the
// test writes, named with --base.
var recipePath = filepath.Join("testdata", "upcycle.toml")

// A family of one's own is upcycled by a recipe as the built-in ones are:
// `dcdit recipe validate` and `recipe plan` read the teacher file from its
// headers through the family, `dcdit upcycle` grafts, distils, saves and
// evaluates, and the DC model it writes loads and samples.
func TestRecipe(t *testing.T) {
	teacher, err := tinydit.NewTeacher(teacherConfig(), modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	train(t, "pretrain", teacher.Parameters(), &distill.Diffusion{Model: teacher,
		Process: &diffusion.DDPM{Schedule: ddpm.Linear(diffusionSteps)}}, trainingData(t), pretrainSteps, 3e-3)
	dir := t.TempDir()
	base := filepath.Join(dir, "teacher.safetensors")
	if err := teacher.Save(base); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI("recipe", "validate", recipePath, "--base", base)
	if code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("recipe validate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("recipe", "plan", "--json", recipePath, "--base", base)
	if code != 0 {
		t.Fatalf("recipe plan: exit %d: %s", code, errOut)
	}
	var plan struct {
		Backbone struct {
			Architecture string `json:"architecture"`
			Config       *tinydit.TeacherConfig
		} `json:"backbone"`
		Parameters struct {
			Total, New, Copied, Base, Dropped int64
		} `json:"parameters"`
		Stages []struct {
			Trainable int64 `json:"trainable_params"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("recipe plan --json: %v", err)
	}
	ps := plan.Parameters
	if plan.Backbone.Architecture != tinydit.Kind || plan.Backbone.Config == nil || *plan.Backbone.Config != *teacherConfig() {
		t.Errorf("plan's backbone %+v, want the teacher's %+v", plan.Backbone, teacherConfig())
	}
	if ps.Copied+ps.New != ps.Total || ps.Copied+ps.Dropped != ps.Base || ps.Base != int64(teacher.Parameters().Len()) {
		t.Errorf("plan's parameters %+v; the teacher has %d", ps, teacher.Parameters().Len())
	}
	if len(plan.Stages) != 1 || plan.Stages[0].Trainable != ps.New {
		t.Errorf("plan's stages %+v, want one training the %d new parameters", plan.Stages, ps.New)
	}

	run := filepath.Join(dir, "run")
	code, out, errOut = runCLI("upcycle", recipePath, "--base", base, "--out", run, "--quiet")
	if code != 0 {
		t.Fatalf("upcycle: exit %d: %s%s", code, out, errOut)
	}
	path := filepath.Join(run, "model.safetensors")
	m, meta, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Backbone.Kind != tinydit.Kind {
		t.Errorf("upcycled model's backbone is %q, want %q", meta.Backbone.Kind, tinydit.Kind)
	}
	joint, err := upcycle.JoinParams(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(joint.Len()); got != ps.Total {
		t.Errorf("upcycled model has %d parameters, the plan %d", got, ps.Total)
	}
	t.Run("sample", func(t *testing.T) { checkSample(t, path, m.Config.Cells()) })

	data, err := os.ReadFile(filepath.Join(run, "eval.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Rho float64 `json:"rho"`
			FD  float64 `json:"fd"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("eval.json: %v", err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("eval.json has %d rows, want the recipe's 2 ρ", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		if math.IsNaN(row.FD) || math.IsInf(row.FD, 0) {
			t.Errorf("eval.json: ρ %g: FD %v", row.Rho, row.FD)
		}
	}
}

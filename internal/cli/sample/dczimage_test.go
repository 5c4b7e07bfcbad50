package sample

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/zimage"
)

// A DC model grafted onto a Z-Image, its router keeping every cell,
// samples from prompts what the Z-Image itself samples (the same
// captions, flow matching, guidance against the empty prompt, seed); at a
// tail-drop fraction with Lite-CFG it keeps fewer tokens and says so.
func TestDCZImageSample(t *testing.T) {
	const seed, S = 6, 8
	dir := t.TempDir()
	zm, m := zimagetest.Grafted(t, seed, S)
	zc := zm.Config
	table, err := json.Marshal(shapes.NewCaptionTable(zc.CapFeatDim, 2))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{shapes.CaptionTableKey: string(table)}
	base := filepath.Join(dir, "base")
	if err := zimage.Save(base, zm, nil, meta); err != nil {
		t.Fatal(err)
	}
	zimagetest.KeepAll(m)
	dcPath := filepath.Join(dir, "dc.safetensors")
	if err := checkpoint.Save(dcPath, m, checkpoint.Info{Extra: meta}); err != nil {
		t.Fatal(err)
	}
	sample := func(ckpt string, rho, rhoUncond float64) ([]float32, map[string]string) {
		t.Helper()
		ios, _, _, _ := iostreams.Test()
		out := filepath.Join(t.TempDir(), "z.safetensors")
		opts := &Options{IO: ios, Checkpoint: ckpt, Prompts: []string{"a red disc", "a small blue ring on top"}, Steps: 3, CFG: 2.5, Shift: 3,
			Seed: 4, Out: out, Classes: []int{0}, Num: 1, Quiet: true, Rho: rho, RhoGiven: rho != 0, RhoUncond: rhoUncond, RhoUncondGiven: rhoUncond != rho}
		if ckpt == base {
			opts.Size = strconv.Itoa(S) + "x" + strconv.Itoa(S)
		}
		if err := Run(opts); err != nil {
			t.Fatal(err)
		}
		return readLatents(t, out)
	}
	want, _ := sample(base, 0, 0)
	got, md := sample(dcPath, 0, 0)
	if err := fixtures.RelErr(got, want); !fixtures.Within(err, 1e-4) {
		t.Fatalf("the grafted model's samples against the Z-Image's: relative error %.2g", err)
	}
	if md["dcdit.backbone"] != zimage.Kind || md["dcdit.tokens"] != strconv.Itoa(m.Config.Cells()) {
		t.Errorf("metadata %v: want the backbone and the token count", md)
	}
	// Fewer tokens at a budget: drop half the conditional branch's
	// boundaries and most of the unconditional one's.
	m.Params.Get("hnet.routing_module.residual_scorer.3.bias").Values()[0] = 0
	if err := checkpoint.Save(dcPath, m, checkpoint.Info{Extra: meta}); err != nil {
		t.Fatal(err)
	}
	_, md = sample(dcPath, 0.5, 0.9)
	if md["dcdit.rho"] != "0.5" || md["dcdit.rho_uncond"] != "0.9" || md["dcdit.kept_per_step"] == "" {
		t.Errorf("metadata %v: want ρ 0.5, unconditional ρ 0.9 and the kept tokens per step", md)
	}

	// A flow-matching record gives the steps, guidance, dense steps and
	// shift the command line does not (instead of Z-Image-Turbo's).
	rec := checkpoint.Sampling{Process: checkpoint.ProcessFlowMatching, DenseBelow: 500, CFG: 2, Steps: 2, Shift: 2.5}
	if err := checkpoint.Save(dcPath, m, checkpoint.Info{Extra: meta, Sampling: &rec}); err != nil {
		t.Fatal(err)
	}
	md, stderr, err := sampleCmd(t, dcPath, "--prompt", "a red disc", "--rho", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	if md["dcdit.steps"] != "2" || md["dcdit.cfg"] != "2" || md["dcdit.shift"] != "2.5" || md["dcdit.dense_below"] != "500" || !strings.Contains(stderr, "--shift 2.5 (checkpoint)") {
		t.Errorf("metadata %v, stderr %q: want the recorded settings", md, stderr)
	}
	ddpmRec := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, CFG: 4, Steps: 2}
	if err := checkpoint.Save(dcPath, m, checkpoint.Info{Extra: meta, Sampling: &ddpmRec}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sampleCmd(t, dcPath, "--prompt", "a red disc"); err == nil || !strings.Contains(err.Error(), "process ddpm") {
		t.Errorf("a DDPM record on a Z-Image backbone: error %v", err)
	}
}

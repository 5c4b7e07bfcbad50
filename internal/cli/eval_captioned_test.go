package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/zimage"
)

// captionedModel writes a small Z-Image that records a caption table, as
// 'dcdit train' writes one, and a captioned shapes data file at its size.
func captionedModel(t *testing.T) (model, data, plainData string) {
	t.Helper()
	dir := t.TempDir()
	cfg := testckpt.SmallZImageConfig()
	m, err := zimage.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Params.Data {
		m.Params.Data[i] += float32(i%11) / 100
	}
	info, err := json.Marshal(shapes.NewCaptionTable(cfg.CapFeatDim, 3))
	if err != nil {
		t.Fatal(err)
	}
	model = filepath.Join(dir, "model")
	if err := zimage.Save(model, m, nil, map[string]string{shapes.CaptionTableKey: string(info)}); err != nil {
		t.Fatal(err)
	}
	g, err := shapes.New(8, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     *string
		captions bool
	}{{&data, true}, {&plainData, false}} {
		var s *datasets.Set
		// Class-balanced, as a recipe's evaluation draws: the first samples'
		// classes again in the next ones, for the FD's floor.
		if c.captions {
			s, err = g.BalancedCaptionedSet(2 * len(shapes.Classes))
		} else {
			s, err = g.BalancedSet(2 * len(shapes.Classes))
		}
		if err != nil {
			t.Fatal(err)
		}
		*c.path = filepath.Join(dir, strings.Replace("captions-X.safetensors", "X", map[bool]string{true: "yes", false: "no"}[c.captions], 1))
		if err := datasets.Write(*c.path, s); err != nil {
			t.Fatal(err)
		}
	}
	return model, data, plainData
}

// A caption-conditioned Z-Image is scored on its own: samples for the
// data's captions, their FD, class accuracy and prompt following; the
// flags that measure a DC model against a teacher, data without captions
// and a GPU are refused.
func TestEvalCaptioned(t *testing.T) {
	model, data, plain := captionedModel(t)
	features := filepath.Join("..", "..", "testdata", "featnet", "model.safetensors")
	args := []string{"eval", model, "--data", data, "--features", features, "--samples", "4", "--steps", "2", "--cfg", "2", "--shift", "1"}
	code, stdout, stderr := run(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		FD              *float64 `json:"fd"`
		ClassAccuracy   *float64 `json:"class_accuracy"`
		PromptFollowing *float64 `json:"prompt_following"`
		DataFDFloor     *float64 `json:"data_fd_floor"`
		NumSamples      int      `json:"num_samples"`
		Shift           float64  `json:"shift"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if got.FD == nil || !(*got.FD >= 0) || got.ClassAccuracy == nil || got.PromptFollowing == nil || got.DataFDFloor == nil || got.NumSamples != 4 || got.Shift != 1 {
		t.Errorf("report %s", stdout)
	}
	if code, stdout, _ := run(t, args...); code != 0 || !strings.Contains(stdout, "prompt following") {
		t.Errorf("table: exit %d, %q", code, stdout)
	}
	for _, c := range []struct {
		name  string
		extra []string
		data  string
		code  int
		want  string
	}{
		{"a teacher", []string{"--teacher", "x.safetensors"}, data, 2, "--teacher measures a DC model against its teacher"},
		{"no captions", nil, plain, 1, "needs data with captions"},
		{"a GPU", []string{"--device", "cuda"}, data, 2, "CPU only"},
		{"too many samples", []string{"--samples", "40"}, data, 1, fmt.Sprintf("the data has %d", 2*len(shapes.Classes))},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := append([]string{"eval", model, "--data", c.data, "--features", features, "--samples", "4", "--steps", "2"}, c.extra...)
			code, _, stderr := run(t, a...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.want)
			}
		})
	}
}

// 'dcdit eval' on a DC-Z-Image: a DC model grafted onto a Z-Image, its
// router keeping every cell, is measured against that Z-Image as its
// teacher (the caption table and caption length from the DC checkpoint):
// every row has prompt following, and the DC model's predictions are the
// teacher's.
func TestEvalDCZImage(t *testing.T) {
	dir := t.TempDir()
	zm, m := zimagetest.Grafted(t, 7, 8)
	zimagetest.KeepAll(m)
	info, err := json.Marshal(shapes.NewCaptionTable(zm.Config.CapFeatDim, 3))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{shapes.CaptionTableKey: string(info)}
	teacher := filepath.Join(dir, "teacher")
	if err := zimage.Save(teacher, zm, nil, meta); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "dc.safetensors")
	m.Backbone.(*zimage.Backbone).CaptionLen = shapes.MaxCaptionWords
	if err := checkpoint.Save(model, m, checkpoint.Info{Extra: meta}); err != nil {
		t.Fatal(err)
	}
	g, err := shapes.New(8, 5)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.CaptionedSet(12)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.safetensors")
	if err := datasets.Write(data, s); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "eval", model, "--teacher", teacher, "--data", data, "--features", filepath.Join("..", "..", "testdata", "featnet", "model.safetensors"),
		"--rho", "0", "--samples", "4", "--num", "4", "--steps", "3", "--cfg", "2", "--lite", "0,0", "--lite-cfg", "2", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Process string `json:"process"`
		Rows    []struct {
			EpsRelMSE       float64  `json:"eps_rel_mse"`
			PromptFollowing *float64 `json:"prompt_following"`
		} `json:"rows"`
		Teacher struct {
			GFLOPs          float64  `json:"gflops_per_image"`
			PromptFollowing *float64 `json:"prompt_following"`
		} `json:"teacher"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Process != "flow_matching" || len(r.Rows) != 1 || r.Rows[0].PromptFollowing == nil || r.Teacher.PromptFollowing == nil || !(r.Teacher.GFLOPs > 0) {
		t.Fatalf("report %+v, want one flow-matching row with prompt following, and the teacher's", r)
	}
	if !(r.Rows[0].EpsRelMSE < 1e-9) {
		t.Errorf("ε rel MSE %g against the teacher the model is", r.Rows[0].EpsRelMSE)
	}
}

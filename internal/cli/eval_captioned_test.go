package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/internal/testckpt"
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
		if c.captions {
			s, err = g.CaptionedSet(12)
		} else {
			s, err = g.Set(12)
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
		{"no captions", nil, plain, 1, "has no captions"},
		{"a GPU", []string{"--device", "cuda"}, data, 2, "CPU only"},
		{"too many samples", []string{"--samples", "40"}, data, 1, "holds 12 samples"},
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

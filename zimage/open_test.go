package zimage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/family"
)

// The family opens a saved Z-Image as a frozen teacher, a config.json
// given standing in for the folder's; its FLOPs count any caption length
// as ForwardFLOPs does, and its own at TypicalCaptionLen. A model that
// patches several frames at a time is refused.
func TestOpenTeacher(t *testing.T) {
	cfg := tinyConfig(true)
	m, err := Init(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := Save(dir, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var override map[string]any
	if err := json.Unmarshal(raw, &override); err != nil {
		t.Fatal(err)
	}
	override["rope_theta"] = 2 * cfg.RopeTheta
	for _, c := range []struct {
		name  string
		cfg   map[string]any
		theta float64
	}{{"the folder's config", nil, cfg.RopeTheta}, {"a config given", override, 2 * cfg.RopeTheta}} {
		t.Run(c.name, func(t *testing.T) {
			tt, _, err := Family{}.OpenTeacher(dir, family.OpenOptions{Config: c.cfg})
			if err != nil {
				t.Fatal(err)
			}
			zt := tt.(Teacher)
			if zt.Model.Config.RopeTheta != c.theta || zt.Parameters().RequiresGrad() {
				t.Errorf("rope_theta %v (want %v), requires grad %v (want frozen)", zt.Model.Config.RopeTheta, c.theta, zt.Parameters().RequiresGrad())
			}
			rows, cols := 4*cfg.PatchSize, 2*cfg.PatchSize
			cc := tt.(family.CaptionCosted)
			for _, n := range []int{1, 7, TypicalCaptionLen} {
				if got, want := cc.CaptionFLOPs(rows, cols, n), ForwardFLOPs(cfg, tt.Tokens(rows, cols), n).Total(); got != want {
					t.Errorf("caption of %d: %v FLOPs, ForwardFLOPs counts %v", n, got, want)
				}
			}
			if got, want := tt.ForwardFLOPs(rows, cols), cc.CaptionFLOPs(rows, cols, TypicalCaptionLen); got != want {
				t.Errorf("ForwardFLOPs %v, want the typical caption's %v", got, want)
			}
		})
	}
	frames := tinyConfig(true)
	frames.FPatchSize = 2
	fm, err := Init(frames, 3)
	if err != nil {
		t.Fatal(err)
	}
	fdir := filepath.Join(t.TempDir(), "frames")
	if err := Save(fdir, fm, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (Family{}).OpenTeacher(fdir, family.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "2 frames at a time") {
		t.Errorf("a model of frame patches: err = %v", err)
	}
}

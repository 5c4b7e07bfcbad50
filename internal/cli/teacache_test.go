package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/dctest"
)

// copyTo copies a model file into dir, where its calibration may go.
func copyTo(t *testing.T, src, dir string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// `dcdit sample --teacache` refuses an uncalibrated model, naming the
// fit; after `dcdit teacache fit` it samples, at threshold 0 the same
// latents as without it, for a DiT teacher and a DC model.
func TestTeaCacheFitAndSample(t *testing.T) {
	dir := t.TempDir()
	d := ditTinyCase(t)
	for _, tt := range []struct {
		name  string
		model string
		extra []string
	}{
		{"dit", copyTo(t, d.weights, dir), []string{"--num-heads", d.heads}},
		{"dc", copyTo(t, dctest.Checkpoint(t), dir), nil},
	} {
		args := func(out string, more ...string) []string {
			return append(append([]string{"sample", tt.model, "--steps", "4", "--class", "1,2", "--out", filepath.Join(dir, out)}, tt.extra...), more...)
		}
		code, _, stderr := run(t, args("x.safetensors", "--teacache", "0.5")...)
		if code == 0 || !strings.Contains(stderr, "dcdit teacache fit") {
			t.Fatalf("%s: uncalibrated --teacache: exit %d, %s", tt.name, code, stderr)
		}
		fit := append([]string{"teacache", "fit", tt.model, "--steps", "4", "--num", "2", "--class", "0,1,2,3"}, tt.extra...)
		if code, _, stderr := run(t, fit...); code != 0 {
			t.Fatalf("%s: fit: exit %d: %s", tt.name, code, stderr)
		}
		if _, err := os.Stat(tt.model + ".teacache.json"); err != nil {
			t.Fatalf("%s: no sidecar: %v", tt.name, err)
		}
		if code, _, stderr := run(t, args("plain.safetensors")...); code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.name, code, stderr)
		}
		if code, _, stderr := run(t, args("cached.safetensors", "--teacache", "0")...); code != 0 {
			t.Fatalf("%s: --teacache 0: exit %d: %s", tt.name, code, stderr)
		}
		_, plain, _ := readLatents(t, filepath.Join(dir, "plain.safetensors"))
		_, cached, md := readLatents(t, filepath.Join(dir, "cached.safetensors"))
		if !bytes.Equal(plain, cached) || md["dcdit.teacache"] != "0" || md["dcdit.teacache_skipped"] == "" {
			t.Errorf("%s: --teacache 0 differs from plain sampling (metadata %v)", tt.name, md)
		}
	}
}

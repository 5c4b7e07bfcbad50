package cli

import (
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/oracle"
)

// Every kind of safetensors file the commands write — data, a feature
// network, samples, converted checkpoints (one file and shards; F32, BF16,
// F16), a DC checkpoint imported from the official files — reads the same
// in an independent reader (github.com/nlpodyssey/safetensors).
func TestFilesReadByAnIndependentReader(t *testing.T) {
	dir := t.TempDir()
	dit := filepath.Join(testdata, "checkpoints", "dit-original.safetensors")
	pt := filepath.Join(dir, "official.pt")
	for _, args := range [][]string{
		{"data", "shapes", "--num", "8", "--size", "8", "--out", filepath.Join(dir, "data.safetensors"), "-q"},
		{"featnet", "train", "--steps", "2", "--samples", "16", "--batch", "4", "--heldout", "8", "--size", "8", "--out", filepath.Join(dir, "featnet.safetensors"), "-q"},
		{"sample", dit, "--steps", "2", "--num", "2", "--out", filepath.Join(dir, "samples.safetensors"), "-q"},
		{"convert", dit, filepath.Join(dir, "shards"), "--layout", "diffusers", "--dtype", "bf16", "--shard-size", "50kB", "-q"},
		{"convert", dit, filepath.Join(dir, "f16.safetensors"), "--layout", "original", "--dtype", "f16", "-q"},
		{"convert", dctest.Checkpoint(t), pt, "--layout", "official", "-q"},
		{"convert", pt, filepath.Join(dir, "imported.safetensors"), "--layout", "dcdit", "--official-config", filepath.Join(dir, "official.yaml"), "-q"},
	} {
		if code, _, stderr := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	if n := oracle.CheckTree(t, dir); n < 8 {
		t.Errorf("checked %d files, want the 8 or more the commands wrote", n)
	}
}

package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTempTarget(t *testing.T) {
	tests := []struct {
		name, target string
		ok           bool
	}{
		{".model.safetensors.tmp-123456", "model.safetensors", true},
		{".run.json.tmp-1", "run.json", true},
		{".a.tmp-1.tmp-22", "a.tmp-1", true},
		{"model.safetensors.tmp-123", "", false}, // not hidden
		{".model.safetensors.tmp-", "", false},   // no suffix
		{".model.safetensors.tmp-12a", "", false},
		{".tmp-12", "", false}, // no target
		{".dcdit.lock", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TempTarget(tt.name)
			if got != tt.target || ok != tt.ok {
				t.Fatalf("TempTarget(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.target, tt.ok)
			}
		})
	}
}

// The temporary file of a Write that never finished is what RemoveTemps
// removes, and nothing else.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	stop := errors.New("killed")
	// A failed Write removes its own temporary file; a kill does not, so
	// make one the way Write names it.
	f, err := os.CreateTemp(dir, ".state-00000004.safetensors.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	keep := []string{"state-00000002.safetensors", ".hidden", "notes.tmp-1", LockName}
	for _, name := range append(keep, ".other.bin.tmp-77") {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	}
	if err := Write(filepath.Join(dir, "run.json"), func(w io.Writer) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
	removed, err := RemoveTemps(dir, func(target string) bool { return strings.HasPrefix(target, "state-") })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{f.Name()}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if removed, _ = RemoveTemps(dir, nil); len(removed) != 1 || filepath.Base(removed[0]) != ".other.bin.tmp-77" {
		t.Fatalf("removed %v, want only .other.bin.tmp-77", removed)
	}
	for _, name := range keep {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
	if removed, err := RemoveTemps(filepath.Join(dir, "missing"), nil); err != nil || removed != nil {
		t.Fatalf("a missing folder: %v, %v", removed, err)
	}
}

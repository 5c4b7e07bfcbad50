package oracle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Check passes a file both readers read alike, fails one the independent
// reader refuses, and sets F8 files apart as uncheckable.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, dt dtype.DType) string {
		path := filepath.Join(dir, name)
		ts := []safetensors.WriteTensor{{Name: "w", DType: dt, Shape: []int64{2, 2}, Src: bytes.NewReader(make([]byte, 4*dt.Size()))}}
		if err := safetensors.Write(path, ts, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := Check(write("ok.safetensors", dtype.BF16)); err != nil {
		t.Errorf("a valid file: %v", err)
	}
	bad := write("bad.safetensors", dtype.F32)
	b, _ := os.ReadFile(bad)
	if err := os.WriteFile(bad, append(b, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(bad); err == nil || errors.Is(err, ErrUnknownDType) {
		t.Errorf("a file with a trailing byte: %v", err)
	}
	if err := Check(write("f8.safetensors", dtype.F8_E4M3)); !errors.Is(err, ErrUnknownDType) {
		t.Errorf("an F8 file: %v, want ErrUnknownDType", err)
	}
}

package distill

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// FuzzManifest reads arbitrary bytes as a run folder's run.json: an
// accepted manifest names at least one checkpoint, a rejected one is an
// error naming the file, and lastGood (used in error messages) never
// panics.
func FuzzManifest(f *testing.F) {
	for _, s := range []string{
		`{"stage":"distill","fingerprint":"3f2a","step":100,"checkpoints":["state-00000050.safetensors","state-00000100.safetensors"]}`,
		`{"stage":"train","fingerprint":"","step":0,"checkpoints":["state-00000000.safetensors"]}`,
		`{"stage":"x","checkpoints":[]}`, `{"checkpoints":null}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	r := &runFolder{dir: dir, stage: "distill"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(r.path(manifestName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := r.readManifest()
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), r.path(manifestName)) {
				t.Fatalf("error does not name the file: %v", err)
			}
		case m == nil:
			t.Fatal("no manifest and no error for an existing run.json")
		case len(m.Checkpoints) == 0:
			t.Fatal("accepted a manifest that names no checkpoint")
		}
		_ = r.lastGood()
	})
}

// FuzzMetricsLog reads arbitrary bytes as metrics.jsonl and keeps the
// lines up to a step, as a resumed run does: no panic, and every kept
// line is a complete JSON object whose step is at most the resume step.
func FuzzMetricsLog(f *testing.F) {
	lines := `{"stage":"distill","step":1,"loss":0.5,"lr":0.0001,"grad_norm":1.2,"steps_per_s":3.4}
{"stage":"distill","step":2,"loss":0.4,"lr":0.0001,"grad_norm":1.1,"steps_per_s":3.5}
{"stage":"distill","step":3,"loss":0.3`
	f.Add([]byte(lines), 2)
	f.Add([]byte(lines), 0)
	f.Add([]byte("{\"step\":1e400}\n{\"step\":-5}\n\n"), 10)
	f.Add([]byte(""), 0)
	dir := f.TempDir()
	r := &runFolder{dir: dir, stage: "distill"}
	f.Fuzz(func(t *testing.T, data []byte, start int) {
		path := r.path("metrics.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := r.openLog(start)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		kept, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) > len(data) {
			t.Fatalf("kept %d bytes of %d", len(kept), len(data))
		}
		for line := range bytes.Lines(kept) {
			var rec struct {
				Step int `json:"step"`
			}
			if err := json.Unmarshal(line, &rec); err != nil || rec.Step > start || !bytes.HasSuffix(line, []byte("\n")) {
				t.Fatalf("kept line %q (resume step %d): %v", line, start, err)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 2 {
			t.Fatalf("left %d files in the run folder: %v", len(entries), entries)
		}
	})
}

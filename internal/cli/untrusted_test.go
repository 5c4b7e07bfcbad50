package cli

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// rewriteFile copies a safetensors file into a fresh folder under name,
// letting edit change its tensors' bytes (by name) and its metadata.
func rewriteFile(t *testing.T, src, name string, edit func(ts map[string][]byte, md map[string]string)) string {
	t.Helper()
	f, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := map[string][]byte{}
	var list []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		tn, _ := f.Tensor(info.Name)
		raw, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		data[info.Name] = slices.Clone(raw)
		list = append(list, safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: slices.Clone(info.Shape)})
	}
	md := map[string]string{}
	for k, v := range f.Metadata() {
		md[k] = v
	}
	edit(data, md)
	for i := range list {
		list[i].Data = data[list[i].Name]
	}
	dst := filepath.Join(t.TempDir(), name)
	if err := safetensors.Write(dst, list, md); err != nil {
		t.Fatal(err)
	}
	return dst
}

// editJSON changes the JSON object under metadata key through a generic map.
func editJSON(t *testing.T, key string, edit func(map[string]any)) func(map[string][]byte, map[string]string) {
	return func(_ map[string][]byte, md map[string]string) {
		var v map[string]any
		if err := json.Unmarshal([]byte(md[key]), &v); err != nil {
			t.Fatal(err)
		}
		edit(v)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		md[key] = string(b)
	}
}

// setLatent overwrites latent value i of a data file.
func setLatent(i int, v float32) func(map[string][]byte, map[string]string) {
	return func(ts map[string][]byte, _ map[string]string) {
		binary.LittleEndian.PutUint32(ts["latents"][4*i:], math.Float32bits(v))
	}
}

// Malformed metadata and data, as a user might hand them over: each ends
// in one bounded "dcdit: " line naming the file and the problem, exit 1,
// no stack trace and no internal error.
func TestUntrustedInputs(t *testing.T) {
	teacher := filepath.Join("..", "..", "testdata", "teacher", "model.safetensors")
	dcModel := dctest.Checkpoint(t)
	tinyTeacher := randomTeacherFile(t)
	data := shapesFile(t, 4)
	dcConfig := func(part, key string, v any) string {
		return rewriteFile(t, dcModel, "dc-edited.safetensors", editJSON(t, "dcdit.config", func(c map[string]any) {
			m := c[part].(map[string]any)
			if part == "backbone" {
				m = m["config"].(map[string]any)
			}
			m[key] = v
		}))
	}
	evalArgs := func(model, teacher, data string, extra ...string) []string {
		return append([]string{"eval", model, "--teacher", teacher, "--data", data, "--num", "2", "--samples", "1", "--steps", "1", "--no-lite"}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"sample --num-heads 3", []string{"sample", teacher, "--num-heads", "3", "--steps", "1"},
			[]string{"model.safetensors", "3 heads do not divide the hidden size 128"}},
		{"sample dit_config heads 3", []string{"sample", rewriteFile(t, teacher, "heads3.safetensors", editJSON(t, "dcdit.dit_config", func(c map[string]any) { c["num_heads"] = 3 })), "--steps", "1"},
			[]string{"heads3.safetensors", "3 heads do not divide the hidden size 128"}},
		{"eval --teacher-heads 3", evalArgs(dcModel, tinyTeacher, data, "--teacher-heads", "3"),
			[]string{"--teacher", "teacher.safetensors", "3 heads do not divide the hidden size 64"}},
		{"DC grid_rows 100000", []string{"sample", dcConfig("scaffold", "grid_rows", 100000), "--steps", "1"},
			[]string{"dc-edited.safetensors", "grid_rows = 100000, want at most 1024"}},
		{"DC grid_cols 100000 in eval", evalArgs(dcConfig("scaffold", "grid_cols", 100000), tinyTeacher, data, "--teacher-heads", "4"),
			[]string{"dc-edited.safetensors", "grid_cols = 100000"}},
		{"DC depth 100000", []string{"sample", dcConfig("backbone", "depth", 100000), "--steps", "1"},
			[]string{"dc-edited.safetensors", "depth = 100000, want at most 1024"}},
		{"DC depth 1000", []string{"sample", dcConfig("backbone", "depth", 1000), "--steps", "1"},
			[]string{"dc-edited.safetensors", "depth = 1000, but the file holds"}},
		{"DC heads 3", []string{"sample", dcConfig("backbone", "heads", 3), "--steps", "1"},
			[]string{"dc-edited.safetensors", "3 heads"}},
		{"data outlier", evalArgs(dcModel, tinyTeacher, rewriteFile(t, data, "outlier.safetensors", setLatent(3*4*16*16+5, 1e30)), "--teacher-heads", "4"),
			[]string{"outlier.safetensors", "latent value 1e+30 in sample 3 (index 5", "±10000"}},
		{"data NaN", evalArgs(dcModel, tinyTeacher, rewriteFile(t, data, "nan.safetensors", setLatent(17, float32(math.NaN()))), "--teacher-heads", "4"),
			[]string{"nan.safetensors", "latent value NaN in sample 0 (index 17"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.args[0] == "sample" {
				c.args = append(c.args, "--out", filepath.Join(t.TempDir(), "out.safetensors"))
			}
			code, stdout, stderr := run(t, c.args...)
			if code != exitError {
				t.Errorf("exit %d, want %d", code, exitError)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if stdout != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "dcdit: ") || len(stderr) > 1024 ||
				strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine") {
				t.Fatalf("stdout %q, stderr (%d bytes) %.500q: want one short 'dcdit: ' line on stderr", stdout, len(stderr), stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

// A DC checkpoint without checksums still works, but inspect and sample
// say that its integrity cannot be checked.
func TestMissingChecksumWarning(t *testing.T) {
	plain := rewriteFile(t, dctest.Checkpoint(t), "no-crc.safetensors", func(_ map[string][]byte, md map[string]string) { delete(md, "dcdit.crc32c") })
	code, stdout, stderr := run(t, "inspect", plain)
	if code != 0 || !strings.Contains(stdout, `no __metadata__ "dcdit.crc32c"`) {
		t.Errorf("inspect: exit %d, stdout %q, stderr %q: want a checksum warning", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "latents.safetensors")
	code, _, stderr = run(t, "sample", plain, "--steps", "1", "--num", "1", "--out", out)
	if code != 0 || !strings.Contains(stderr, "warning: "+plain+`: no __metadata__ "dcdit.crc32c"`) {
		t.Errorf("sample: exit %d, stderr %q: want a checksum warning", code, stderr)
	}
}

// inspect reports a DC checkpoint whose metadata states an absurd depth in
// one short warning instead of listing a million missing tensors.
func TestInspectBoundedDepth(t *testing.T) {
	path := rewriteFile(t, dctest.Checkpoint(t), "deep.safetensors", editJSON(t, "dcdit.config", func(c map[string]any) {
		c["backbone"].(map[string]any)["config"].(map[string]any)["depth"] = 100000
	}))
	code, stdout, stderr := run(t, "inspect", path)
	if code != 0 || len(stdout) > 16<<10 || !strings.Contains(stdout, "depth = 100000") {
		t.Errorf("inspect: exit %d, %d bytes of output (stderr %q): want a short report with the depth warning:\n%.2000s", code, len(stdout), stderr, stdout)
	}
}

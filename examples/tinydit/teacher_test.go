package tinydit_test

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// saveTeacher writes a fresh teacher of the test config and returns it
// with its file.
func saveTeacher(t *testing.T) (*tinydit.Teacher, string) {
	t.Helper()
	teacher, err := tinydit.NewTeacher(teacherConfig(), modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "teacher.safetensors")
	if err := teacher.Save(path); err != nil {
		t.Fatal(err)
	}
	return teacher, path
}

// rewrite copies the file at path with its tensors and metadata changed by
// edit.
func rewrite(t *testing.T, path string, edit func(ts map[string]safetensors.WriteTensor, md map[string]string)) string {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := map[string]safetensors.WriteTensor{}
	for _, info := range f.Tensors() {
		tn, _ := f.Tensor(info.Name)
		raw, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		ts[info.Name] = safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: slices.Clone(info.Shape), Data: slices.Clone(raw)}
	}
	md := maps.Clone(f.Metadata())
	f.Close()
	edit(ts, md)
	out := filepath.Join(t.TempDir(), "edited.safetensors")
	if err := safetensors.Write(out, slices.Collect(maps.Values(ts)), md); err != nil {
		t.Fatal(err)
	}
	return out
}

// A saved teacher loads back as the same tensors, and family.OpenTeacher
// opens it; a file that is not one, or is one with anything wrong, is
// refused with an error naming the key or tensor.
func TestTeacherFile(t *testing.T) {
	teacher, good := saveTeacher(t)
	const victim = tinydit.TensorPrefix + "blocks.0.attn.qkv.weight"
	configOf := func(md map[string]string, change func(c *tinydit.TeacherConfig)) {
		var c tinydit.TeacherConfig
		if err := json.Unmarshal([]byte(md[tinydit.ConfigKey]), &c); err != nil {
			t.Fatal(err)
		}
		change(&c)
		raw, _ := json.Marshal(c)
		md[tinydit.ConfigKey] = string(raw)
	}
	cases := []struct {
		name string
		edit func(ts map[string]safetensors.WriteTensor, md map[string]string)
		want []string // in the error; none for a good file
	}{
		{"as saved", func(map[string]safetensors.WriteTensor, map[string]string) {}, nil},
		{"unmarked", func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, tinydit.FamilyKey) },
			[]string{tinydit.FamilyKey, "not a tinydit teacher"}},
		{"no config", func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, tinydit.ConfigKey) },
			[]string{tinydit.ConfigKey}},
		{"unknown config field", func(_ map[string]safetensors.WriteTensor, md map[string]string) {
			md[tinydit.ConfigKey] = strings.Replace(md[tinydit.ConfigKey], `"patch_size"`, `"patch"`, 1)
		}, []string{tinydit.ConfigKey, "unknown field"}},
		{"depth beyond the bound", func(_ map[string]safetensors.WriteTensor, md map[string]string) {
			configOf(md, func(c *tinydit.TeacherConfig) { c.Backbone.Depth = family.MaxBlocks * 100 })
		}, []string{"tinydit depth"}},
		{"patch not dividing the grid", func(_ map[string]safetensors.WriteTensor, md map[string]string) {
			configOf(md, func(c *tinydit.TeacherConfig) { c.PatchSize = c.Backbone.GridSize + 1 })
		}, []string{"patch_size"}},
		{"missing, mis-shaped and unexpected tensors together", func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
			delete(ts, tinydit.TensorPrefix+"norm_out.weight")
			v := ts[victim]
			v.Shape[0]--
			v.Data = v.Data[:len(v.Data)-int(v.Shape[1])*4]
			ts[victim] = v
			ts["pos_embed"] = safetensors.WriteTensor{Name: "pos_embed", DType: dtype.F32, Shape: []int64{1}, Data: make([]byte, 4)}
		}, []string{`missing tensor "tinydit.norm_out.weight"`, `tensor "` + victim + `": shape`, `unexpected tensor "pos_embed"`}},
		{"BF16 tensor", func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
			v := ts[victim]
			v.DType, v.Data = dtype.BF16, v.Data[:len(v.Data)/2]
			ts[victim] = v
		}, []string{victim, "dtype BF16, want F32"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := rewrite(t, good, tc.edit)
			got, err := tinydit.LoadTeacher(path)
			if tc.want != nil {
				for _, w := range tc.want {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error %v, want one naming %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Describe() != teacher.Describe() {
				t.Errorf("loaded %s, saved %s", got.Describe(), teacher.Describe())
			}
			for _, p := range teacher.Parameters().List() {
				if !slices.Equal(bitsOf(got.Parameters().Get(p.Name).Values()), bitsOf(p.Values())) {
					t.Errorf("%s differs after loading", p.Name)
				}
			}
		})
	}

	// The registry opens the file by its mark, and refuses an unmarked
	// one: no family knows it.
	opened, _, err := family.OpenTeacher(good, family.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := opened.(*tinydit.Teacher); !ok {
		t.Errorf("family.OpenTeacher gave a %T", opened)
	}
	unmarked := rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, tinydit.FamilyKey) })
	if _, _, err := family.OpenTeacher(unmarked, family.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "no registered family") {
		t.Errorf("family.OpenTeacher of an unmarked file: %v, want no family to open it", err)
	}
}

// Guide writes into both branches what the DDPM sampler's guidance
// computes over the channels Guidance names, bit for bit, and leaves the
// variances each branch's own.
func TestGuide(t *testing.T) {
	teacher, err := tinydit.NewTeacher(teacherConfig(), modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	C, hw := teacher.InChannels(), gridSide*gridSide
	n := teacher.OutChannels() * hw
	for _, scale := range []float32{1.5, 4} {
		channels, g := teacher.Guidance(float64(scale))
		if channels != C || g != float64(scale) {
			t.Errorf("Guidance(%g) = %d channels, factor %g; want every ε channel (%d), factor %g", scale, channels, g, C, scale)
		}
		// One sample's outputs: conditional then unconditional.
		out := make([]float32, 2*n)
		for i := range out {
			out[i] = float32(i%97)/13 - 3
		}
		sampler := ddpm.Guidance{Scale: scale, Channels: channels}.Guided(func([]float32, []int, []int) ([]float32, error) {
			return slices.Clone(out), nil
		}, ddpm.Shape{B: 1, C: C, HW: hw})
		want, err := sampler(make([]float32, C*hw), []int{0}, []int{0})
		if err != nil {
			t.Fatal(err)
		}
		c, u := slices.Clone(out[:n]), slices.Clone(out[n:])
		teacher.Guide(c, u, hw, scale)
		if !slices.Equal(bitsOf(c), bitsOf(want[:n])) {
			t.Errorf("scale %g: Guide's conditional output differs from the DDPM sampler's", scale)
		}
		if !slices.Equal(bitsOf(u[:C*hw]), bitsOf(c[:C*hw])) || !slices.Equal(bitsOf(u[C*hw:]), bitsOf(out[n+C*hw:])) {
			t.Errorf("scale %g: Guide left the unconditional ε unguided or changed its variances", scale)
		}
	}
}

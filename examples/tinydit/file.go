package tinydit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// A teacher's file is safetensors: every tensor of TeacherConfig.Shapes,
// F32, under TensorPrefix, and two metadata keys, FamilyKey (= Kind, what
// marks the file as this family's) and ConfigKey (the TeacherConfig as
// JSON).
//
// The prefix keeps checkpoint detection (loaders/arch) from reading the
// file as a DiT: the bare names (x_embedder.proj.weight,
// blocks.0.attn.qkv.weight) are DiT's, and the family registry asks the
// families in kind order, "dit" before "tinydit".
const (
	FamilyKey    = family.MetadataKey
	ConfigKey    = "dcdit.tinydit.config"
	TensorPrefix = "tinydit."
)

// Save writes the teacher to path (atomically).
func (t *Teacher) Save(path string) error {
	cfg, err := json.Marshal(t.Config)
	if err != nil {
		return fmt.Errorf("tinydit: %s: %w", path, err)
	}
	shapes := t.Config.Shapes()
	var ts []safetensors.WriteTensor
	for _, p := range t.params.List() {
		ts = append(ts, safetensors.WriteTensor{Name: TensorPrefix + p.Name, DType: dtype.F32,
			Shape: int64s(shapes[p.Name]), Data: dtype.F32Bytes(p.Values())})
	}
	if err := safetensors.Write(path, ts, map[string]string{FamilyKey: Kind, ConfigKey: string(cfg)}); err != nil {
		return fmt.Errorf("tinydit: %w", err)
	}
	return nil
}

// LoadTeacher reads a teacher Save wrote. The config is validated before
// it sizes anything, and the file's tensors are accounted for strictly:
// missing, unexpected and mis-shaped ones are reported together.
func LoadTeacher(path string) (*Teacher, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tinydit: %w", err)
	}
	defer f.Close()
	md := f.Metadata()
	if md[FamilyKey] != Kind {
		return nil, fmt.Errorf("tinydit: %s: metadata %q = %q, want %q (not a tinydit teacher)", path, FamilyKey, md[FamilyKey], Kind)
	}
	raw, ok := md[ConfigKey]
	if !ok {
		return nil, fmt.Errorf("tinydit: %s: no metadata %q (the teacher's config)", path, ConfigKey)
	}
	c := new(TeacherConfig)
	if err := family.DecodeStrict([]byte(raw), c); err != nil {
		return nil, fmt.Errorf("tinydit: %s: metadata %q: %w", path, ConfigKey, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("tinydit: %s: %w", path, err)
	}
	want := c.Shapes()
	var problems []string
	for _, info := range f.Tensors() {
		name, ok := strings.CutPrefix(info.Name, TensorPrefix)
		shape, known := want[name]
		switch {
		case !ok || !known:
			problems = append(problems, fmt.Sprintf("unexpected tensor %q (shape %v)", info.Name, info.Shape))
		case !slices.Equal(info.Shape, int64s(shape)):
			problems = append(problems, fmt.Sprintf("tensor %q: shape %v, want %v", info.Name, info.Shape, shape))
		case info.DType != dtype.F32:
			problems = append(problems, fmt.Sprintf("tensor %q: dtype %v, want %v", info.Name, info.DType, dtype.F32))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := f.Tensor(TensorPrefix + name); !ok {
			problems = append(problems, fmt.Sprintf("missing tensor %q (shape %v)", TensorPrefix+name, want[name]))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("tinydit: %s: %s", path, strings.Join(problems, "; "))
	}
	ts := make(map[string]loaders.Dense, len(want))
	for name, shape := range want {
		tn, _ := f.Tensor(TensorPrefix + name)
		v, err := tn.Float32()
		if err != nil {
			return nil, fmt.Errorf("tinydit: %w", err)
		}
		// The values may alias the file's memory map, which Close unmaps;
		// newTeacher copies them.
		ts[name] = loaders.Dense{Shape: shape, Data: v}
	}
	return newTeacher(c, ts)
}

func int64s(shape []int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[i] = int64(d)
	}
	return out
}

// Package testckpt builds the small checkpoints and broken files that tests
// use: one tiny model in every supported layout, a corpus of malformed
// inputs, and sparse full-size checkpoints (holes instead of data) for
// testing header-only work at real scale.
package testckpt

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/pytorch"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/zimage"
)

// TinyDiT is the configuration of the generated DiT checkpoints. Its head
// count is not a preset's, so it is only known where a config says it.
func TinyDiT() *arch.DiTConfig {
	return &arch.DiTConfig{Depth: 2, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
}

// TinyZImage is the configuration of the generated Z-Image checkpoints.
func TinyZImage() *arch.ZImageConfig {
	return &arch.ZImageConfig{Dim: 32, NLayers: 2, NRefinerLayers: 1, NHeads: 2, NKVHeads: 2, InChannels: 16,
		PatchSize: 2, FPatchSize: 1, CapFeatDim: 24, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{4, 6, 6}, AxesLens: []int64{96, 16, 16}, FFNHidden: 85, AdaLNDim: 32, TMidDim: 64, FrequencySize: 256}
}

// ZImageTurbo is the configuration of the released Z-Image-Turbo
// transformer (zimage.TurboConfig).
func ZImageTurbo() *arch.ZImageConfig { return zimage.TurboConfig() }

// Tensors fills the expected tensors with seeded random values in dtype dt.
func Tensors(exp arch.Expected, dt dtype.DType, seed uint64) ([]safetensors.WriteTensor, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]safetensors.WriteTensor, len(exp))
	for i, name := range exp.Names() {
		shape := exp.Shape(i)
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		vals := make([]float32, n)
		for j := range vals {
			vals[j] = float32(rng.NormFloat64() * 0.02)
		}
		data := make([]byte, n*int64(dt.Size()))
		if err := dtype.EncodeFloat32(data, vals, dt); err != nil {
			return nil, err
		}
		out[i] = safetensors.WriteTensor{Name: name, DType: dt, Shape: shape, Data: data}
	}
	return out, nil
}

// Generate writes checkpoints/ and bad/ under root.
func Generate(root string) error {
	if err := generateCheckpoints(filepath.Join(root, "checkpoints")); err != nil {
		return err
	}
	return generateBad(filepath.Join(root, "bad"))
}

func generateCheckpoints(dir string) error {
	dit, zi := TinyDiT(), TinyZImage()
	ditOrig, err := Tensors(arch.ExpectedDiT(dit, arch.Original), dtype.F32, 1)
	if err != nil {
		return err
	}
	ditDiff, err := Tensors(arch.ExpectedDiT(dit, arch.Diffusers), dtype.F32, 2)
	if err != nil {
		return err
	}
	ditHalf, err := Tensors(arch.ExpectedDiT(dit, arch.Original), dtype.F16, 3)
	if err != nil {
		return err
	}
	ziDiff, err := Tensors(arch.ExpectedZImage(zi, arch.Diffusers), dtype.BF16, 4)
	if err != nil {
		return err
	}
	ziComfy, err := Tensors(arch.ExpectedZImage(zi, arch.Comfy), dtype.BF16, 5)
	if err != nil {
		return err
	}
	pt := map[string]string{"format": "pt"}
	steps := []func() error{
		func() error {
			return mkdirs(dir, "dit-diffusers/transformer", "dit-diffusers-sharded", "zimage-diffusers/transformer")
		},
		func() error { return safetensors.Write(filepath.Join(dir, "dit-original.safetensors"), ditOrig, pt) },
		func() error {
			return safetensors.Write(filepath.Join(dir, "dit-original-f16.safetensors"), ditHalf, pt)
		},
		func() error {
			return pytorch.Save(filepath.Join(dir, "dit-original.pt"), saveTensors(ditOrig), pytorch.SaveOptions{})
		},
		func() error {
			return pytorch.Save(filepath.Join(dir, "dit-train.pt"), saveTensors(ditOrig), pytorch.SaveOptions{
				Training: true, EMA: true,
				Args: map[string]any{"model": "DiT-tiny", "image_size": int64(dit.InputSize * 8), "num_classes": int64(dit.NumClasses), "global_seed": int64(0)},
			})
		},
		func() error {
			return writeJSON(filepath.Join(dir, "dit-diffusers", "model_index.json"), map[string]any{
				"_class_name": "DiTPipeline", "transformer": []string{"diffusers", "DiTTransformer2DModel"},
			})
		},
		func() error {
			return writeJSON(filepath.Join(dir, "dit-diffusers", "transformer", "config.json"), arch.DiTDiffusersConfig(dit))
		},
		func() error {
			return safetensors.Write(filepath.Join(dir, "dit-diffusers", "transformer", "diffusion_pytorch_model.safetensors"), ditDiff, pt)
		},
		func() error {
			_, err := safetensors.WriteSharded(filepath.Join(dir, "dit-diffusers-sharded"), "diffusion_pytorch_model", ditDiff, 100_000, pt)
			return err
		},
		func() error {
			return writeJSON(filepath.Join(dir, "zimage-diffusers", "transformer", "config.json"), arch.ZImageDiffusersConfig(zi))
		},
		func() error {
			_, err := safetensors.WriteSharded(filepath.Join(dir, "zimage-diffusers", "transformer"), "diffusion_pytorch_model", ziDiff, 60_000, pt)
			return err
		},
		func() error { return safetensors.Write(filepath.Join(dir, "zimage-comfy.safetensors"), ziComfy, nil) },
		func() error {
			full := make([]safetensors.WriteTensor, 0, len(ziComfy)+2)
			for _, t := range ziComfy {
				t.Name = "model.diffusion_model." + t.Name
				full = append(full, t)
			}
			full = append(full,
				safetensors.WriteTensor{Name: "first_stage_model.decoder.conv_in.weight", DType: dtype.BF16, Shape: []int64{8, 16, 3, 3}, Data: make([]byte, 8*16*9*2)},
				safetensors.WriteTensor{Name: "text_encoders.qwen3_4b.transformer.model.norm.weight", DType: dtype.BF16, Shape: []int64{24}, Data: make([]byte, 48)})
			return safetensors.Write(filepath.Join(dir, "zimage-comfy-full.safetensors"), full, nil)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func saveTensors(ts []safetensors.WriteTensor) []pytorch.SaveTensor {
	out := make([]pytorch.SaveTensor, len(ts))
	for i, t := range ts {
		out[i] = pytorch.SaveTensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: t.Data}
	}
	return out
}

func mkdirs(root string, dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	text, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(text, '\n'), 0o644)
}

// rawSafetensors assembles a file from a literal header and a data length,
// bypassing every check of the writer.
func rawSafetensors(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

// BadCase is one malformed input and the phrases its error must contain.
type BadCase struct {
	Path string   // relative to the bad/ folder
	Want []string // substrings of the error message
}

// BadCases lists the corpus written by generateBad.
func BadCases() []BadCase {
	return []BadCase{
		{"empty.safetensors", []string{"empty.safetensors", "shorter than the 8-byte"}},
		{"short.safetensors", []string{"short.safetensors", "shorter than the 8-byte"}},
		{"header-too-large.safetensors", []string{"header-too-large.safetensors", "exceeds the limit of 100000000"}},
		{"header-past-eof.safetensors", []string{"header-past-eof.safetensors", "runs past the end of the file"}},
		{"truncated.safetensors", []string{"truncated.safetensors", "truncated by"}},
		{"trailing.safetensors", []string{"trailing.safetensors", "trailing bytes"}},
		{"not-utf8.safetensors", []string{"not-utf8.safetensors", "not valid UTF-8"}},
		{"not-object.safetensors", []string{"not-object.safetensors", "does not start with '{'"}},
		{"bad-json.safetensors", []string{"bad-json.safetensors", "header"}},
		{"bad-dtype.safetensors", []string{"bad-dtype.safetensors", `"w"`, `unknown dtype "F12"`}},
		{"negative-shape.safetensors", []string{"negative-shape.safetensors", `"w"`, "negative dimension"}},
		{"overflow-shape.safetensors", []string{"overflow-shape.safetensors", `"w"`, "overflows"}},
		{"size-mismatch.safetensors", []string{"size-mismatch.safetensors", `"w"`, "span 12 bytes", "needs 16"}},
		{"hole.safetensors", []string{"hole.safetensors", `"b"`, "hole of 4 bytes"}},
		{"overlap.safetensors", []string{"overlap.safetensors", `"b"`, "overlapping"}},
		{"duplicate.safetensors", []string{"duplicate.safetensors", `"w"`, "twice"}},
		{"metadata-number.safetensors", []string{"metadata-number.safetensors", "__metadata__", `"step"`, "want a string"}},
		{"missing-field.safetensors", []string{"missing-field.safetensors", `"w"`, "data_offsets"}},
		{"index-missing-shard/model.safetensors.index.json", []string{"model.safetensors.index.json", "model-00002-of-00002.safetensors", "missing"}},
		{"index-wrong-shard/model.safetensors.index.json", []string{"model.safetensors.index.json", `"b"`, "indexed in model-00001-of-00002.safetensors but found in model-00002-of-00002.safetensors"}},
		{"index-two-shards/model.safetensors.index.json", []string{"model.safetensors.index.json", `"a"`, "two shards"}},
		{"index-unlisted/model.safetensors.index.json", []string{"model.safetensors.index.json", `"c"`, "not in the index"}},
		{"index-not-held/model.safetensors.index.json", []string{"model.safetensors.index.json", `"z"`, "does not hold it"}},
		{"index-bad-json/model.safetensors.index.json", []string{"model.safetensors.index.json", "not a JSON object"}},
		{"index-escape/model.safetensors.index.json", []string{"model.safetensors.index.json", "not a plain file name"}},
		{"no-weights", []string{"no-weights", "no weights found"}},
		{"garbage.bin", []string{"garbage.bin", "not a zip-format PyTorch checkpoint"}},
		{"garbage.dat", []string{"garbage.dat", "not a safetensors file, an index or a PyTorch zip checkpoint"}},
		{"pickle-global.pt", []string{"pickle-global.pt", "os.system"}},
		{"truncated.pt", []string{"truncated.pt", "zip"}},
		{"legacy.pt", []string{"legacy.pt", "legacy checkpoint", "magic-number pickle"}},
	}
}

func generateBad(dir string) error {
	valid := func(name string, shape []int64) safetensors.WriteTensor {
		n := int64(4)
		for _, d := range shape {
			n *= d
		}
		return safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: shape, Data: make([]byte, n)}
	}
	good, _, err := safetensors.EncodeHeader([]safetensors.WriteTensor{valid("w", []int64{2, 2})}, nil)
	if err != nil {
		return err
	}
	goodFile := append(good, make([]byte, 16)...)
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 200_000_000)
	past := make([]byte, 16)
	binary.LittleEndian.PutUint64(past, 1000)
	files := map[string][]byte{
		"empty.safetensors":            {},
		"short.safetensors":            {1, 2, 3, 4, 5},
		"header-too-large.safetensors": huge,
		"header-past-eof.safetensors":  past,
		"truncated.safetensors":        goodFile[:len(goodFile)-5],
		"trailing.safetensors":         append(append([]byte{}, goodFile...), 0, 0, 0),
		"not-utf8.safetensors":         rawSafetensors("{\"\xff\xfe\":{}}", 0),
		"not-object.safetensors":       rawSafetensors(`[1,2,3]`, 0),
		"bad-json.safetensors":         rawSafetensors(`{"w":{"dtype":"F32",`, 0),
		"bad-dtype.safetensors":        rawSafetensors(`{"w":{"dtype":"F12","shape":[2],"data_offsets":[0,4]}}`, 4),
		"negative-shape.safetensors":   rawSafetensors(`{"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}}`, 16),
		"overflow-shape.safetensors":   rawSafetensors(fmt.Sprintf(`{"w":{"dtype":"F32","shape":[%d,%d],"data_offsets":[0,16]}}`, int64(math.MaxInt32), int64(math.MaxInt64/2)), 16),
		"size-mismatch.safetensors":    rawSafetensors(`{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, 12),
		"hole.safetensors":             rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12),
		"overlap.safetensors":          rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
		"duplicate.safetensors":        rawSafetensors(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
		"metadata-number.safetensors":  rawSafetensors(`{"__metadata__":{"step":100},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4),
		"missing-field.safetensors":    rawSafetensors(`{"w":{"dtype":"F32","shape":[1]}}`, 4),
		"garbage.bin":                  []byte("this is not a checkpoint at all\n"),
		"garbage.dat":                  []byte("neither is this\n"),
		"legacy.pt":                    append([]byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}, make([]byte, 32)...),
	}
	if err := os.MkdirAll(filepath.Join(dir, "no-weights"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "no-weights", "README.txt"), []byte("a folder without weights\n"), 0o644); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := generateBadIndexes(dir, valid); err != nil {
		return err
	}
	return generateBadPickles(dir)
}

func generateBadIndexes(dir string, valid func(string, []int64) safetensors.WriteTensor) error {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	type shard struct {
		name    string
		tensors []string
	}
	cases := []struct {
		dir    string
		shards []shard
		index  string
	}{
		{"index-missing-shard", []shard{{s1, []string{"a"}}}, `{"metadata":{"total_size":8},"weight_map":{"a":"` + s1 + `","b":"` + s2 + `"}}`},
		{"index-wrong-shard", []shard{{s1, []string{"a"}}, {s2, []string{"b"}}}, `{"weight_map":{"a":"` + s1 + `","b":"` + s1 + `"}}`},
		{"index-two-shards", []shard{{s1, []string{"a"}}, {s2, []string{"a", "b"}}}, `{"weight_map":{"a":"` + s1 + `","b":"` + s2 + `"}}`},
		{"index-unlisted", []shard{{s1, []string{"a"}}, {s2, []string{"b", "c"}}}, `{"weight_map":{"a":"` + s1 + `","b":"` + s2 + `"}}`},
		{"index-not-held", []shard{{s1, []string{"a"}}, {s2, []string{"b"}}}, `{"weight_map":{"a":"` + s1 + `","b":"` + s2 + `","z":"` + s2 + `"}}`},
		{"index-bad-json", []shard{{s1, []string{"a"}}}, `{"weight_map":`},
		{"index-escape", []shard{{s1, []string{"a"}}}, `{"weight_map":{"a":"../` + s1 + `"}}`},
	}
	for _, c := range cases {
		d := filepath.Join(dir, c.dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for _, s := range c.shards {
			var ts []safetensors.WriteTensor
			for _, n := range s.tensors {
				ts = append(ts, valid(n, []int64{2}))
			}
			if err := safetensors.Write(filepath.Join(d, s.name), ts, nil); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte(c.index), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generateBadPickles writes PyTorch files that must be refused: one whose
// pickle calls os.system (it must be named, never run) and a cut-off one.
func generateBadPickles(dir string) error {
	// Protocol 2: GLOBAL os.system, the argument tuple, REDUCE, STOP.
	var pkl []byte
	pkl = append(pkl, 0x80, 0x02, 'c')
	pkl = append(pkl, "os\nsystem\n"...)
	arg := "echo pwned"
	pkl = append(pkl, 'X', byte(len(arg)), 0, 0, 0)
	pkl = append(pkl, arg...)
	pkl = append(pkl, 0x85, 'R', '.')
	if err := writeZip(filepath.Join(dir, "pickle-global.pt"), "pickle-global", map[string][]byte{
		"data.pkl": pkl, "version": []byte("3\n"), "byteorder": []byte("little"),
	}); err != nil {
		return err
	}
	ts := []pytorch.SaveTensor{{Name: "w", DType: dtype.F32, Shape: []int64{64, 64}, Data: make([]byte, 64*64*4)}}
	whole := filepath.Join(dir, "whole.pt.tmp")
	if err := pytorch.Save(whole, ts, pytorch.SaveOptions{}); err != nil {
		return err
	}
	defer os.Remove(whole)
	b, err := os.ReadFile(whole)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "truncated.pt"), b[:len(b)/2], 0o644)
}

// writeZip stores records uncompressed under prefix/, in sorted order and
// with zero timestamps so the output is reproducible.
func writeZip(path, prefix string, records map[string][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	names := make([]string, 0, len(records))
	for n := range records {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: prefix + "/" + n, Method: zip.Store})
		if err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(records[n]); err != nil {
			f.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

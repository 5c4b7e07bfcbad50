package zimage

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// readAll returns every tensor of a safetensors file, data copied.
func readAll(t *testing.T, path string) map[string]safetensors.WriteTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]safetensors.WriteTensor{}
	for _, info := range f.Tensors() {
		tt, _ := f.Tensor(info.Name)
		raw, err := tt.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out[info.Name] = safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: slices.Clone(info.Shape), Data: slices.Clone(raw)}
	}
	return out
}

func writeAll(t *testing.T, path string, ts map[string]safetensors.WriteTensor) string {
	t.Helper()
	var list []safetensors.WriteTensor
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		list = append(list, ts[name])
	}
	if err := safetensors.Write(path, list, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// patchKey is the case's all_x_embedder key ("2-1") from its config.json.
func patchKey(t *testing.T, c fixtures.Case) string {
	t.Helper()
	p, ok1 := c.Config["all_patch_size"].([]any)
	f, ok2 := c.Config["all_f_patch_size"].([]any)
	if !ok1 || !ok2 || len(p) == 0 || len(f) == 0 {
		t.Fatalf("%s: config.json lacks all_patch_size / all_f_patch_size", c.Dir)
	}
	return fmt.Sprintf("%v-%v", p[0], f[0])
}

// toComfy converts a diffusers/Tongyi state dict to ComfyUI's single-file
// naming as ComfyUI's z_image key map has it (the inverse of its
// z_image_to_diffusers): fused attention.qkv = cat(to_q, to_k, to_v),
// attention.out, q_norm/k_norm, x_embedder, final_layer; prefix is put
// before every name.
func toComfy(t *testing.T, in map[string]safetensors.WriteTensor, key, prefix string) map[string]safetensors.WriteTensor {
	t.Helper()
	rename := strings.NewReplacer(
		"all_x_embedder."+key+".", "x_embedder.",
		"all_final_layer."+key+".", "final_layer.",
		".attention.to_out.0.", ".attention.out.",
		".attention.norm_q.", ".attention.q_norm.",
		".attention.norm_k.", ".attention.k_norm.",
	)
	out := map[string]safetensors.WriteTensor{}
	for name, tt := range in {
		block, ok := strings.CutSuffix(name, ".attention.to_q.weight")
		switch {
		case ok:
			k, v := in[block+".attention.to_k.weight"], in[block+".attention.to_v.weight"]
			shape := slices.Clone(tt.Shape)
			shape[0] += k.Shape[0] + v.Shape[0]
			data := slices.Concat(tt.Data, k.Data, v.Data)
			n := prefix + block + ".attention.qkv.weight"
			out[n] = safetensors.WriteTensor{Name: n, DType: tt.DType, Shape: shape, Data: data}
		case strings.HasSuffix(name, ".attention.to_k.weight"), strings.HasSuffix(name, ".attention.to_v.weight"):
		default:
			tt.Name = prefix + rename.Replace(name)
			out[tt.Name] = tt
		}
	}
	return out
}

// The ComfyUI naming, bare or under ComfyUI's full-checkpoint prefix next
// to other components, loads to the same parameters as the fixture's
// diffusers naming and gives the same outputs.
func TestLoadComfyNaming(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		orig := filepath.Join(c.Dir, "weights.safetensors")
		ref, err := Load(orig, LoadOptions{Config: c.Config})
		if err != nil {
			t.Fatal(err)
		}
		sameModel(t, orig, c.Config, ref)
		src := readAll(t, orig)
		refOut := fixtureOutputs(t, c, orig)
		for _, prefix := range []string{"", "model.diffusion_model."} {
			t.Run(fmt.Sprintf("prefix=%q", prefix), func(t *testing.T) {
				ts := toComfy(t, src, patchKey(t, c), prefix)
				if prefix != "" {
					// A full checkpoint carries other components beside
					// the denoiser; they are not the model's.
					ts["first_stage_model.decoder.conv_in.bias"] = safetensors.WriteTensor{Name: "first_stage_model.decoder.conv_in.bias", DType: dtype.F32, Shape: []int64{2}, Data: make([]byte, 8)}
				}
				path := writeAll(t, filepath.Join(t.TempDir(), "comfy.safetensors"), ts)
				w, err := Load(path, LoadOptions{Config: c.Config})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(w.Source, "comfy naming") {
					t.Errorf("source %q, want the comfy naming named", w.Source)
				}
				sameModel(t, path, c.Config, w)
				if len(w.Params) != len(ref.Params) {
					t.Fatalf("%d parameters from the ComfyUI naming, %d from diffusers", len(w.Params), len(ref.Params))
				}
				for name, p := range ref.Params {
					q, ok := w.Params[name]
					if !ok || !reflect.DeepEqual(p.Shape, q.Shape) || !reflect.DeepEqual(p.Data, q.Data) {
						t.Errorf("%s differs between the namings", name)
					}
				}
				// Same parameters, same computation: the outputs are
				// identical, not merely close, and pass the fixture.
				if !reflect.DeepEqual(fixtureOutputs(t, c, path), refOut) {
					t.Error("the outputs differ between the namings")
				}
				fixtures.Report(t, compareZImage(c, computeZImage(t, c, path), nil))
			})
		}
	})
}

// sameModel checks that LoadModel on path builds the model New builds
// from w, value for value.
func sameModel(t *testing.T, path string, cfg map[string]any, w *Weights) {
	t.Helper()
	want, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadModel(path, LoadOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Config, want.Config) {
		t.Errorf("LoadModel's config %+v, New's %+v", got.Config, want.Config)
	}
	wl, gl := want.Params.List(), got.Params.List()
	if len(gl) != len(wl) {
		t.Fatalf("LoadModel: %d parameters, New: %d", len(gl), len(wl))
	}
	for i, p := range wl {
		if gl[i].Name != p.Name || !reflect.DeepEqual(gl[i].Values(), p.Values()) {
			t.Errorf("LoadModel's %s differs from New's %s", gl[i].Name, p.Name)
		}
	}
}

// fixtureOutputs runs the model loaded from path on the case's inputs.
func fixtureOutputs(t *testing.T, c fixtures.Case, path string) [][]float32 {
	t.Helper()
	lats, ts, caps := fixtureBatch(t, c, c.Open(t, ioFile))
	out, err := fixtureModel(t, c, path).Forward(lats, ts, caps)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Broken checkpoints are refused with the file, the tensor and the
// expected and found shapes named.
func TestLoadRejectsBrokenCheckpoints(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		orig := filepath.Join(c.Dir, "weights.safetensors")
		src := readAll(t, orig)
		comfy := toComfy(t, src, patchKey(t, c), "")
		noAxes := maps.Clone(c.Config)
		delete(noAxes, "axes_dims")
		for _, tc := range []struct {
			name   string
			edit   func(ts map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor
			config map[string]any
			want   []string
		}{
			{
				name: "diffusers missing to_k",
				edit: func(ts map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor {
					ts = maps.Clone(src)
					delete(ts, "layers.0.attention.to_k.weight")
					return ts
				},
				want: []string{"broken.safetensors", "diffusers naming", "missing layers.0.attention.to_k.weight"},
			},
			{
				name: "comfy missing out",
				edit: func(map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor {
					ts := maps.Clone(comfy)
					delete(ts, "layers.0.attention.out.weight")
					return ts
				},
				want: []string{"broken.safetensors", "comfy naming", "missing layers.0.attention.out.weight"},
			},
			{
				name: "comfy pad token transposed",
				edit: func(map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor {
					ts := maps.Clone(comfy)
					p := ts["cap_pad_token"]
					p.Shape = []int64{p.Shape[1], p.Shape[0]}
					ts["cap_pad_token"] = p
					return ts
				},
				want: []string{"broken.safetensors", fmt.Sprintf("tensor cap_pad_token has shape [%d %d], want [%d %d]",
					comfy["cap_pad_token"].Shape[1], comfy["cap_pad_token"].Shape[0], comfy["cap_pad_token"].Shape[0], comfy["cap_pad_token"].Shape[1])},
			},
			{
				name: "diffusers unexpected tensor",
				edit: func(map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor {
					ts := maps.Clone(src)
					ts["layers.0.attention.to_q.bias"] = safetensors.WriteTensor{Name: "layers.0.attention.to_q.bias", DType: dtype.F32, Shape: []int64{1}, Data: make([]byte, 4)}
					return ts
				},
				want: []string{"unexpected layers.0.attention.to_q.bias"},
			},
			{
				name: "not a Z-Image checkpoint",
				edit: func(map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor {
					return map[string]safetensors.WriteTensor{"foo": {Name: "foo", DType: dtype.F32, Shape: []int64{1}, Data: make([]byte, 4)}}
				},
				want: []string{"broken.safetensors", "not a Z-Image transformer"},
			},
			{
				name:   "no axes_dims",
				edit:   func(map[string]safetensors.WriteTensor) map[string]safetensors.WriteTensor { return src },
				config: noAxes,
				want:   []string{"broken.safetensors", "axes_dims"},
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := writeAll(t, filepath.Join(t.TempDir(), "broken.safetensors"), tc.edit(nil))
				cfg := tc.config
				if cfg == nil {
					cfg = c.Config
				}
				_, err := Load(path, LoadOptions{Config: cfg})
				_, _, errModel := LoadModel(path, LoadOptions{Config: cfg})
				for i, err := range []error{err, errModel} {
					if err == nil {
						t.Fatalf("loader %d loaded a broken checkpoint", i)
					}
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not mention %q", err, w)
						}
					}
				}
			})
		}
	})
}

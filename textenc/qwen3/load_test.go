package qwen3

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// readTensors returns every tensor of a safetensors file, ready to write
// elsewhere.
func readTensors(t *testing.T, path string) []safetensors.WriteTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		tt, _ := f.Tensor(info.Name)
		raw, err := tt.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: slices.Clone(info.Shape), Data: slices.Clone(raw)})
	}
	return out
}

func writeFile(t *testing.T, path string, ts []safetensors.WriteTensor) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(path, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

func writeConfig(t *testing.T, dir string, cfg map[string]any) {
	t.Helper()
	text, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), text, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeShards writes ts into dir as a sharded checkpoint of at least two
// shards with its index.
func writeShards(t *testing.T, dir string, ts []safetensors.WriteTensor) {
	t.Helper()
	var size int64
	for _, tt := range ts {
		size += int64(len(tt.Data))
	}
	if _, err := safetensors.WriteSharded(dir, "model", ts, size/2+1, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := filepath.Glob(filepath.Join(dir, "model-*.safetensors")); len(n) < 2 {
		t.Fatalf("wrote %d shards, want at least 2", len(n))
	}
}

// find returns the named tensor of ts.
func find(t *testing.T, ts []safetensors.WriteTensor, name string) *safetensors.WriteTensor {
	t.Helper()
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	t.Fatalf("no tensor %q", name)
	return nil
}

// prefixed renames every tensor to Qwen3ForCausalLM's naming and adds the
// LM head a causal-LM checkpoint may carry.
func prefixed(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	for _, tt := range ts {
		tt.Name = "model." + tt.Name
		out = append(out, tt)
		if tt.Name == "model.embed_tokens.weight" {
			head := tt
			head.Name = "lm_head.weight"
			out = append(out, head)
		}
	}
	return out
}

// promptIDs are the fixture's prompts, unpadded.
func promptIDs(t *testing.T, c fixtures.Case) [][]int {
	t.Helper()
	ids, masks := fixturePrompts(t, c.Open(t, "io.safetensors"))
	for p := range ids {
		n, err := realTokens(masks[p], len(ids[p]))
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = ids[p][:n]
	}
	return ids
}

// Every checkpoint form loads to the same model: its hidden states are
// those of the fixture file opened directly, bit for bit.
func TestOpenForms(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		ids := promptIDs(t, c)
		for _, weights := range []string{"weights.safetensors", "weights-bf16.safetensors"} {
			ts := readTensors(t, filepath.Join(c.Dir, weights))
			forms := []struct {
				name  string
				build func(t *testing.T, dir string) (path string, opts Options)
			}{
				{"text_encoder folder", func(t *testing.T, dir string) (string, Options) {
					writeConfig(t, dir, c.Config)
					writeFile(t, filepath.Join(dir, "model.safetensors"), ts)
					return dir, Options{}
				}},
				{"pipeline folder", func(t *testing.T, dir string) (string, Options) {
					writeConfig(t, filepath.Join(dir, "text_encoder"), c.Config)
					writeFile(t, filepath.Join(dir, "text_encoder", "model.safetensors"), prefixed(ts))
					if err := os.MkdirAll(filepath.Join(dir, "transformer"), 0o755); err != nil {
						t.Fatal(err)
					}
					return dir, Options{}
				}},
				{"sharded folder", func(t *testing.T, dir string) (string, Options) {
					writeConfig(t, dir, c.Config)
					writeShards(t, dir, prefixed(ts))
					return dir, Options{}
				}},
				{"index file", func(t *testing.T, dir string) (string, Options) {
					writeShards(t, dir, ts)
					return filepath.Join(dir, "model.safetensors.index.json"), Options{Config: c.Config}
				}},
				{"single file, LM head", func(t *testing.T, dir string) (string, Options) {
					path := filepath.Join(dir, "qwen.safetensors")
					head := *find(t, ts, "embed_tokens.weight")
					head.Name = "lm_head.weight"
					writeFile(t, path, append(slices.Clone(ts), head))
					return path, Options{Config: c.Config}
				}},
				{"single file, model. prefix", func(t *testing.T, dir string) (string, Options) {
					path := filepath.Join(dir, "qwen_3_4b.safetensors")
					writeFile(t, path, prefixed(ts))
					return path, Options{Config: c.Config}
				}},
			}
			want, err := fixtureModel(t, c, weights).HiddenStates(ids)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range forms {
				t.Run(weights+"/"+f.name, func(t *testing.T) {
					path, opts := f.build(t, t.TempDir())
					m, err := OpenWith(path, opts)
					if err != nil {
						t.Fatal(err)
					}
					if m.WeightBytes() != fixtureModel(t, c, weights).WeightBytes() {
						t.Errorf("weights take %d bytes, want %d", m.WeightBytes(), fixtureModel(t, c, weights).WeightBytes())
					}
					got, err := m.HiddenStates(ids)
					if err != nil {
						t.Fatal(err)
					}
					for k := range want.States {
						if !slices.Equal(got.States[k], want.States[k]) {
							t.Errorf("hidden_states[%d] differs from the fixture file's", k)
						}
					}
				})
			}
		}
	})
}

// Without a config.json the configuration comes from the shapes, with
// Qwen3-4B's rope_theta and rms_norm_eps, and a warning says so.
func TestOpenInfersConfig(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		path := filepath.Join(t.TempDir(), "qwen.safetensors")
		writeFile(t, path, prefixed(readTensors(t, filepath.Join(c.Dir, "weights-bf16.safetensors"))))
		m, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := resolveConfig(c.Config, Config{})
		if err != nil {
			t.Fatal(err)
		}
		want.RopeTheta, want.RMSNormEps = 1e6, 1e-6
		if m.Config != want {
			t.Errorf("config %+v, want %+v", m.Config, want)
		}
		if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "rope_theta 1e+06 and rms_norm_eps 1e-06") {
			t.Errorf("warnings %q, want one naming the assumed rope_theta and rms_norm_eps", m.Warnings)
		}
	})
}

// Broken checkpoints and configurations are refused with an error naming
// the tensor or key, what was expected and what was found.
func TestOpenErrors(t *testing.T) {
	fixtures.Run(t, kind, func(t *testing.T, c fixtures.Case) {
		base := readTensors(t, filepath.Join(c.Dir, "weights.safetensors"))
		bf16 := readTensors(t, filepath.Join(c.Dir, "weights-bf16.safetensors"))
		hd, kv := c.PositiveInt(t, "head_dim"), c.PositiveInt(t, "num_key_value_heads")
		D := c.PositiveInt(t, "hidden_size")
		edit := func(ts []safetensors.WriteTensor, f func([]safetensors.WriteTensor) []safetensors.WriteTensor) []safetensors.WriteTensor {
			cp := make([]safetensors.WriteTensor, len(ts))
			for i, tt := range ts {
				tt.Data = slices.Clone(tt.Data)
				tt.Shape = slices.Clone(tt.Shape)
				cp[i] = tt
			}
			return f(cp)
		}
		withConfig := func(key string, v any) map[string]any {
			cfg := map[string]any{}
			for k, x := range c.Config {
				cfg[k] = x
			}
			cfg[key] = v
			return cfg
		}
		tests := []struct {
			name    string
			tensors []safetensors.WriteTensor
			config  map[string]any
			want    []string // substrings of the error
		}{
			{"missing tensor", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return slices.DeleteFunc(ts, func(tt safetensors.WriteTensor) bool { return tt.Name == "layers.1.mlp.up_proj.weight" })
			}), c.Config, []string{`missing tensors "layers.1.mlp.up_proj.weight"`}},
			{"transposed projection", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				p := find(t, ts, "layers.1.self_attn.k_proj.weight")
				p.Shape = []int64{p.Shape[1], p.Shape[0]}
				return ts
			}), c.Config, []string{`tensor "layers.1.self_attn.k_proj.weight": shape`, "want [" + strconv.Itoa(kv*hd) + " " + strconv.Itoa(D) + "]"}},
			{"unexpected tensor", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "layers.0.self_attn.q_proj.bias", DType: dtype.F32, Shape: []int64{1}, Data: make([]byte, 4)})
			}), c.Config, []string{`unexpected tensors "layers.0.self_attn.q_proj.bias"`}},
			{"NaN in an F32 matrix", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				binary.LittleEndian.PutUint32(find(t, ts, "layers.0.mlp.down_proj.weight").Data[4*3:], math.Float32bits(float32(math.NaN())))
				return ts
			}), c.Config, []string{`tensor "layers.0.mlp.down_proj.weight": element 3 is NaN`}},
			{"Inf in a norm weight", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				binary.LittleEndian.PutUint32(find(t, ts, "norm.weight").Data, math.Float32bits(float32(math.Inf(1))))
				return ts
			}), c.Config, []string{`tensor "norm.weight": element 0 is +Inf`}},
			{"NaN in a BF16 matrix", edit(bf16, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				binary.LittleEndian.PutUint16(find(t, ts, "embed_tokens.weight").Data[2*5:], 0x7fc1)
				return ts
			}), c.Config, []string{`tensor "embed_tokens.weight": element 5 is NaN`}},
			{"integer weights", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				find(t, ts, "norm.weight").DType = dtype.I32
				return ts
			}), c.Config, []string{`tensor "norm.weight": dtype I32, want a floating-point type`}},
			{"no embeddings", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return slices.DeleteFunc(ts, func(tt safetensors.WriteTensor) bool { return tt.Name == "embed_tokens.weight" })
			}), c.Config, []string{"no embed_tokens.weight"}},
			{"foreign prefix", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i := range ts {
					ts[i].Name = "text_model." + ts[i].Name
				}
				return ts
			}), c.Config, []string{`tensor "text_model.embed_tokens.weight": want`, `"model." prefix`}},
			{"two models", edit(base, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				e := *find(t, ts, "embed_tokens.weight")
				e.Name = "model.embed_tokens.weight"
				return append(ts, e)
			}), c.Config, []string{"several embedding tables", `"model.embed_tokens.weight"`}},
			{"config disagrees with shapes", base, withConfig("num_attention_heads", float64(c.PositiveInt(t, "num_attention_heads")+kv)),
				[]string{`tensor "layers.0.self_attn.q_proj.weight": shape`, `tensor "layers.0.self_attn.o_proj.weight": shape`}},
			{"config has more layers", base, withConfig("num_hidden_layers", float64(c.PositiveInt(t, "num_hidden_layers")+1)),
				[]string{`missing tensors "layers.` + strconv.Itoa(c.PositiveInt(t, "num_hidden_layers")) + `.input_layernorm.weight"`}},
			{"sliding window", base, withConfig("use_sliding_window", true), []string{"use_sliding_window true is not supported"}},
			{"sliding layer", base, withConfig("layer_types", []any{"full_attention", "sliding_attention"}), []string{`layer_types[1] sliding_attention is not supported`}},
			{"yarn", base, withConfig("rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4.0}), []string{"rope_scaling.rope_type yarn is not supported"}},
			{"gelu", base, withConfig("hidden_act", "gelu"), []string{`hidden_act gelu, want "silu"`}},
			{"fractional size", base, withConfig("head_dim", 16.5), []string{"head_dim 16.5, want an integer"}},
			{"bad theta", base, withConfig("rope_theta", -1.0), []string{"rope_theta -1, want > 0"}},
			{"qwen2", base, withConfig("model_type", "qwen2"), []string{`model_type qwen2, want "qwen3"`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "bad.safetensors")
				writeFile(t, path, tt.tensors)
				_, err := OpenWith(path, Options{Config: tt.config})
				if err == nil {
					t.Fatal("opened")
				}
				t.Log(err)
				for _, s := range append([]string{"qwen3: ", path}, tt.want...) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
			})
		}
	})
}

// A newer transformers writes rope_theta under rope_parameters.
func TestResolveConfigRopeParameters(t *testing.T) {
	tests := []struct {
		name  string
		cfg   map[string]any
		theta float64
		warn  bool
	}{
		{"top level", map[string]any{"rope_theta": 5e5, "rms_norm_eps": 1e-5}, 5e5, false},
		{"rope_parameters", map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 2e5}, "rms_norm_eps": 1e-5}, 2e5, false},
		{"absent", map[string]any{"rms_norm_eps": 1e-5}, 1e6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, warnings, err := resolveConfig(tt.cfg, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if c.RopeTheta != tt.theta || c.RMSNormEps != 1e-5 {
				t.Errorf("rope_theta %v, rms_norm_eps %v; want %v, 1e-05", c.RopeTheta, c.RMSNormEps, tt.theta)
			}
			if (len(warnings) > 0) != tt.warn {
				t.Errorf("warnings %q", warnings)
			}
		})
	}
}

package vae

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

func TestKeyMaps(t *testing.T) {
	tests := []struct {
		diffusers, ldm string
		blocks         int
	}{
		{"encoder.conv_in.weight", "encoder.conv_in.weight", 4},
		{"decoder.conv_out.bias", "decoder.conv_out.bias", 4},
		{"encoder.conv_norm_out.weight", "encoder.norm_out.weight", 4},
		{"quant_conv.weight", "quant_conv.weight", 4},
		{"post_quant_conv.bias", "post_quant_conv.bias", 4},
		{"encoder.down_blocks.2.resnets.1.norm2.bias", "encoder.down.2.block.1.norm2.bias", 4},
		{"encoder.down_blocks.1.resnets.0.conv_shortcut.weight", "encoder.down.1.block.0.nin_shortcut.weight", 4},
		{"encoder.down_blocks.0.downsamplers.0.conv.weight", "encoder.down.0.downsample.conv.weight", 4},
		{"decoder.up_blocks.0.resnets.2.conv1.weight", "decoder.up.3.block.2.conv1.weight", 4},
		{"decoder.up_blocks.0.resnets.2.conv1.weight", "decoder.up.2.block.2.conv1.weight", 3},
		{"decoder.up_blocks.3.resnets.0.conv_shortcut.bias", "decoder.up.0.block.0.nin_shortcut.bias", 4},
		{"decoder.up_blocks.1.upsamplers.0.conv.bias", "decoder.up.2.upsample.conv.bias", 4},
		{"encoder.mid_block.resnets.0.conv1.weight", "encoder.mid.block_1.conv1.weight", 4},
		{"decoder.mid_block.resnets.1.norm1.bias", "decoder.mid.block_2.norm1.bias", 4},
		{"decoder.mid_block.attentions.0.group_norm.weight", "decoder.mid.attn_1.norm.weight", 4},
		{"encoder.mid_block.attentions.0.to_q.weight", "encoder.mid.attn_1.q.weight", 4},
		{"encoder.mid_block.attentions.0.to_k.bias", "encoder.mid.attn_1.k.bias", 4},
		{"encoder.mid_block.attentions.0.to_v.weight", "encoder.mid.attn_1.v.weight", 4},
		{"decoder.mid_block.attentions.0.to_out.0.weight", "decoder.mid.attn_1.proj_out.weight", 4},
	}
	for _, tt := range tests {
		t.Run(tt.diffusers, func(t *testing.T) {
			if got, ok := DiffusersToLDM(tt.diffusers, tt.blocks); !ok || got != tt.ldm {
				t.Errorf("DiffusersToLDM = %q, %v; want %q", got, ok, tt.ldm)
			}
			if got, ok := LDMToDiffusers(tt.ldm, tt.blocks); !ok || got != tt.diffusers {
				t.Errorf("LDMToDiffusers(%q) = %q, %v; want %q", tt.ldm, got, ok, tt.diffusers)
			}
		})
	}
}

// The attention names of pre-0.14 diffusers checkpoints map to LDM names
// (and from there to the current ones).
func TestKeyMapsDeprecated(t *testing.T) {
	for old, ldm := range map[string]string{
		"encoder.mid_block.attentions.0.query.weight":    "encoder.mid.attn_1.q.weight",
		"encoder.mid_block.attentions.0.key.bias":        "encoder.mid.attn_1.k.bias",
		"decoder.mid_block.attentions.0.value.weight":    "decoder.mid.attn_1.v.weight",
		"decoder.mid_block.attentions.0.proj_attn.bias":  "decoder.mid.attn_1.proj_out.bias",
		"decoder.mid_block.attentions.0.group_norm.bias": "decoder.mid.attn_1.norm.bias",
	} {
		if got, ok := DiffusersToLDM(old, 4); !ok || got != ldm {
			t.Errorf("DiffusersToLDM(%q) = %q, %v; want %q", old, got, ok, ldm)
		}
	}
}

func TestKeyMapsReject(t *testing.T) {
	for _, tt := range []struct {
		name   string
		naming Naming
	}{
		{"model.diffusion_model.input_blocks.0.0.weight", Diffusers},
		{"model.diffusion_model.input_blocks.0.0.weight", LDM},
		{"encoder.down_blocks.01.resnets.0.conv1.weight", Diffusers},
		{"encoder.down_blocks.4.resnets.0.conv1.weight", Diffusers},
		{"decoder.up_blocks.-1.resnets.0.conv1.weight", Diffusers},
		{"decoder.up_blocks.0.upsamplers.1.conv.weight", Diffusers},
		{"encoder.down_blocks.0.resnets.0.conv3.weight", Diffusers},
		{"encoder.down_blocks.0.resnets.0.conv1.scale", Diffusers},
		{"encoder.mid_block.resnets.2.conv1.weight", Diffusers},
		{"encoder.mid_block.attentions.1.to_q.weight", Diffusers},
		{"encoder.down.0.block.0.conv_shortcut.weight", LDM},
		{"decoder.up.4.block.0.conv1.weight", LDM},
		{"encoder.mid.attn_1.to_q.weight", LDM},
		{"encoder.mid.block_3.conv1.weight", LDM},
		{"encoder.norm_out", LDM},
		{"first_stage_model.encoder.conv_in.weight", LDM},
	} {
		t.Run(tt.naming.String()+"/"+tt.name, func(t *testing.T) {
			f := DiffusersToLDM
			if tt.naming == LDM {
				f = LDMToDiffusers
			}
			if got, ok := f(tt.name, 4); ok {
				t.Errorf("mapped to %q, want no mapping", got)
			}
		})
	}
}

func specsOf(t *testing.T, path string) []TensorSpec {
	t.Helper()
	var out []TensorSpec
	for _, w := range readTensors(t, path) {
		out = append(out, TensorSpec{Name: w.Name, Shape: w.Shape})
	}
	return out
}

// The fixtures' two weight files map onto each other exactly: ConvertNames
// turns either's names and shapes into the other's, and the renamed tensors
// hold the same bytes.
func TestConvertFixtureWeights(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		prefix, ok := c.Config["ldm_prefix"].(string)
		if !ok {
			t.Fatalf("%s: config.json has no ldm_prefix", c.Dir)
		}
		files := map[Naming]string{Diffusers: filepath.Join(c.Dir, weightsFile), LDM: filepath.Join(c.Dir, ldmFile)}
		data := map[Naming]map[string]safetensors.WriteTensor{}
		for n, f := range files {
			data[n] = map[string]safetensors.WriteTensor{}
			for _, w := range readTensors(t, f) {
				data[n][w.Name] = w
			}
		}
		for from, to := range map[Naming]Naming{Diffusers: LDM, LDM: Diffusers} {
			t.Run(from.String()+"-to-"+to.String(), func(t *testing.T) {
				rs, err := ConvertNames(specsOf(t, files[from]), to, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) != len(data[to]) {
					t.Errorf("%d tensors converted, the %s file holds %d", len(rs), to, len(data[to]))
				}
				for _, r := range rs {
					want, ok := data[to][r.To]
					if !ok {
						t.Errorf("%q became %q, which the %s file lacks", r.From, r.To, to)
						continue
					}
					if !slices.Equal(r.ToShape, want.Shape) {
						t.Errorf("%q → %q: shape %v, the file has %v", r.From, r.To, r.ToShape, want.Shape)
					}
					if !bytes.Equal(data[from][r.From].Data, want.Data) {
						t.Errorf("%q and %q hold different values", r.From, r.To)
					}
				}
			})
		}
	})
}

func TestDetectNaming(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		prefix, _ := c.Config["ldm_prefix"].(string)
		blocks := len(caseConfig(t, c).BlockOutChannels)
		for _, tt := range []struct {
			file   string
			naming Naming
			prefix string
		}{{weightsFile, Diffusers, ""}, {ldmFile, LDM, prefix}} {
			src, err := DetectNaming(specsOf(t, filepath.Join(c.Dir, tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			if src.Naming != tt.naming || src.Prefix != tt.prefix || src.NumBlocks != blocks {
				t.Errorf("%s: naming %v, prefix %q, %d blocks; want %v, %q, %d", tt.file, src.Naming, src.Prefix, src.NumBlocks, tt.naming, tt.prefix, blocks)
			}
		}
	})
	// Inside a full checkpoint only the prefixed tensors are the VAE's.
	src, err := DetectNaming([]TensorSpec{
		{Name: "model.diffusion_model.out.2.weight", Shape: []int64{4, 320, 3, 3}},
		{Name: "cond_stage_model.transformer.text_model.final_layer_norm.weight", Shape: []int64{768}},
		{Name: LDMPrefix + "decoder.up.1.block.0.conv1.weight", Shape: []int64{8, 8, 3, 3}},
		{Name: LDMPrefix + "encoder.mid.attn_1.q.weight", Shape: []int64{8, 8, 1, 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Rename{
		{From: LDMPrefix + "decoder.up.1.block.0.conv1.weight", To: "decoder.up_blocks.0.resnets.0.conv1.weight", FromShape: []int64{8, 8, 3, 3}, ToShape: []int64{8, 8, 3, 3}},
		{From: LDMPrefix + "encoder.mid.attn_1.q.weight", To: "encoder.mid_block.attentions.0.to_q.weight", FromShape: []int64{8, 8, 1, 1}, ToShape: []int64{8, 8}},
	}
	if src.Naming != LDM || src.NumBlocks != 2 || !slices.EqualFunc(src.Tensors, want, func(a, b Rename) bool {
		return a.From == b.From && a.To == b.To && slices.Equal(a.FromShape, b.FromShape) && slices.Equal(a.ToShape, b.ToShape)
	}) {
		t.Errorf("got %+v, want LDM, 2 blocks, %+v", src, want)
	}
	for _, bad := range [][]TensorSpec{
		nil,
		{{Name: "encoder.conv_in.weight"}, {Name: "text.weight"}},
		{{Name: "encoder.mid_block.attentions.0.to_q.weight"}, {Name: "encoder.mid_block.attentions.0.query.weight"}},
	} {
		if src, err := DetectNaming(bad); err == nil {
			t.Errorf("DetectNaming(%v) = %+v, want an error", bad, src)
		}
	}
}

// The key maps never panic, and a name either maps both ways to itself
// (up to pre-0.14 attention names) or not at all.
func FuzzKeyMaps(f *testing.F) {
	for _, s := range []string{"decoder.up_blocks.0.resnets.2.conv1.weight", "encoder.mid.attn_1.q.weight", "decoder.up.3.upsample.conv.bias",
		"encoder.mid_block.attentions.0.query.weight", "quant_conv.bias"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, name string, n int) {
		if d, ok := DiffusersToLDM(name, n); ok {
			back, ok := LDMToDiffusers(d, n)
			if !ok {
				t.Fatalf("%q → %q, which does not map back", name, d)
			}
			if again, _ := DiffusersToLDM(back, n); again != d {
				t.Fatalf("%q → %q → %q → %q", name, d, back, again)
			}
		}
		if d, ok := LDMToDiffusers(name, n); ok {
			if back, ok := DiffusersToLDM(d, n); !ok || back != name {
				t.Fatalf("%q → %q → %q, %v", name, d, back, ok)
			}
		}
	})
}

package arch

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

func turboConfig() *ZImageConfig {
	return &ZImageConfig{Dim: 3840, NLayers: 30, NRefinerLayers: 2, NHeads: 30, NKVHeads: 30, InChannels: 16,
		PatchSize: 2, FPatchSize: 1, CapFeatDim: 2560, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{32, 48, 48}, AxesLens: []int64{1536, 512, 512}, FFNHidden: 10240, AdaLNDim: 256, TMidDim: 1024, FrequencySize: 256}
}

func xl2Config() *DiTConfig {
	return &DiTConfig{Depth: 28, HiddenSize: 1152, NumHeads: 16, PatchSize: 2, InChannels: 4, InputSize: 32,
		LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256, Preset: "DiT-XL/2"}
}

func metas(e Expected, prefix string) []TensorMeta {
	out := make([]TensorMeta, len(e))
	for i := range e {
		out[i] = TensorMeta{Name: prefix + e[i].name, DType: dtype.F32, Shape: e.Shape(i)}
	}
	return out
}

// The published sizes of the released models pin the expected-key tables.
func TestExpectedMatchesPublishedSizes(t *testing.T) {
	cases := []struct {
		name    string
		exp     Expected
		tensors int
		params  int64
	}{
		{"DiT-XL/2 original", ExpectedDiT(xl2Config(), Original), 292, 675_129_632},
		{"DiT-XL/2 diffusers", ExpectedDiT(xl2Config(), Diffusers), 538, 674_834_720 + 27*(1152*256+1152+1152*1152+1152+1001*1152)},
		{"Z-Image-Turbo", ExpectedZImage(turboConfig(), Diffusers), 521, 6_154_908_736},
		{"Z-Image-Turbo comfy", ExpectedZImage(turboConfig(), Comfy), 521 - 2*34, 6_154_908_736},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.exp) != c.tensors {
				t.Errorf("tensors = %d, want %d", len(c.exp), c.tensors)
			}
			if got := c.exp.NumParameters(); got != c.params {
				t.Errorf("parameters = %d, want %d", got, c.params)
			}
		})
	}
}

// Detection must recover the configuration a state dict was generated from.
func TestDetectRoundTrip(t *testing.T) {
	xl := xl2Config()
	xlDiff := *xl
	xlDiff.InputSize = 32 // assumed default: diffusers naming stores no position table
	turbo := turboConfig()
	cases := []struct {
		name   string
		in     Input
		arch   Architecture
		layout Layout
		want   any
	}{
		{"dit original", Input{Tensors: metas(ExpectedDiT(xl, Original), "")}, DiT, Original, xl},
		{"dit diffusers", Input{Tensors: metas(ExpectedDiT(xl, Diffusers), "")}, DiT, Diffusers, &xlDiff},
		{"zimage diffusers", Input{Tensors: metas(ExpectedZImage(turbo, Diffusers), "")}, ZImage, Diffusers, turbo},
		{"zimage comfy", Input{Tensors: metas(ExpectedZImage(turbo, Comfy), "")}, ZImage, Comfy, turbo},
		{"zimage comfy prefixed", Input{Tensors: metas(ExpectedZImage(turbo, Comfy), comfyPrefix)}, ZImage, Comfy, turbo},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Detect(c.in)
			if r.Architecture != c.arch || r.Layout != c.layout {
				t.Fatalf("detected %s/%s, want %s/%s", r.Architecture, r.Layout, c.arch, c.layout)
			}
			if !reflect.DeepEqual(r.Config, c.want) {
				t.Errorf("config = %+v\nwant     %+v", r.Config, c.want)
			}
			if len(r.Missing)+len(r.Unexpected)+len(r.Mismatched) != 0 {
				t.Errorf("missing %v, unexpected %v, mismatched %v", r.Missing, r.Unexpected, r.Mismatched)
			}
		})
	}
}

func TestDetectReportsKeyProblems(t *testing.T) {
	ts := metas(ExpectedDiT(xl2Config(), Original), "")
	var kept []TensorMeta
	for _, m := range ts {
		if m.Name == "blocks.3.mlp.fc2.bias" {
			continue
		}
		if m.Name == "blocks.5.attn.proj.weight" {
			m.Shape = []int64{1152, 1000}
		}
		kept = append(kept, m)
	}
	kept = append(kept, TensorMeta{Name: "blocks.0.attn.extra", DType: dtype.F32, Shape: []int64{3}})
	r := Detect(Input{Tensors: kept})
	if !reflect.DeepEqual(r.Missing, []string{"blocks.3.mlp.fc2.bias"}) {
		t.Errorf("missing = %v", r.Missing)
	}
	if !reflect.DeepEqual(r.Unexpected, []string{"blocks.0.attn.extra"}) {
		t.Errorf("unexpected = %v", r.Unexpected)
	}
	if len(r.Mismatched) != 1 || r.Mismatched[0].Name != "blocks.5.attn.proj.weight" {
		t.Errorf("mismatched = %v", r.Mismatched)
	}
	joined := strings.Join(r.Warnings, "\n")
	for _, want := range []string{"blocks.3.mlp.fc2.bias", "blocks.0.attn.extra", "[1152 1000]"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings do not mention %q:\n%s", want, joined)
		}
	}
}

// DC-DiT tensors, in the official names that DC checkpoints keep, are
// recognised with and without dcdit's metadata and grouped into the
// scaffold's parts and the backbone.
func TestDetectDC(t *testing.T) {
	names := map[string]string{
		"x_embedder.proj.weight":                                  BucketEmbedders,
		"t_embedder.mlp.0.weight":                                 BucketEmbedders,
		"y_embedder.embedding_table.weight":                       BucketEmbedders,
		"hnet.encoder.layers.0.conv1.weight":                      BucketEncoder,
		"hnet.encoder.rmsnorm.weight":                             BucketEncoder,
		"hnet.routing_module.proj.weight":                         BucketRouter,
		"hnet.routing_module.residual_scorer.3.bias":              BucketRouter,
		"hnet.residual_proj.weight":                               BucketDecoder,
		"hnet.decoder.layers.1.skip_proj.weight":                  BucketDecoder,
		"hnet.main_network.main_network.layers.0.attn.qkv.weight": BucketBackbone,
		"hnet.main_network.main_network.rmsnorm.weight":           BucketBackbone,
		"final_layer.linear.weight":                               BucketFinalLayer,
		"something.else":                                          BucketOther,
	}
	var ts []TensorMeta
	want := map[string]int64{}
	for name, g := range names {
		ts = append(ts, TensorMeta{Name: name, DType: dtype.F32, Shape: []int64{2, 3}})
		want[g] += 6
	}
	cases := []struct {
		name   string
		in     Input
		layout Layout
		config bool
		warn   string
	}{
		{"DC checkpoint", Input{Tensors: ts, Metadata: map[string]string{MetadataConfigKey: `{"format_version": 1}`}}, DCLayout, true, ""},
		{"DC checkpoint, bad JSON", Input{Tensors: ts, Metadata: map[string]string{MetadataConfigKey: `{`}}, DCLayout, false, "not a JSON object"},
		{"reference state_dict", Input{Tensors: append(ts, TensorMeta{Name: "pos_embed", DType: dtype.F32, Shape: []int64{1}})}, Original, false, "without dcdit metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Detect(c.in)
			if r.Architecture != DCDiT || r.Layout != c.layout {
				t.Fatalf("detected %s/%s, want dcdit/%s", r.Architecture, r.Layout, c.layout)
			}
			if (r.Config != nil) != c.config {
				t.Errorf("config %v", r.Config)
			}
			w := maps.Clone(want)
			if c.layout == Original {
				w[BucketEmbedders]++
			}
			if !reflect.DeepEqual(r.Parameters, w) {
				t.Errorf("groups %v, want %v", r.Parameters, w)
			}
			if joined := strings.Join(r.Warnings, "\n"); c.warn != "" && !strings.Contains(joined, c.warn) {
				t.Errorf("warnings %q lack %q", joined, c.warn)
			}
		})
	}
}

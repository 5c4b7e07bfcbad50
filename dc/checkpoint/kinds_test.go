package checkpoint_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
)

// pretrainedCase is a DC model around a pretrained backbone that keeps
// its own names (kinds dit and zimage), with a batch to run it on.
type pretrainedCase struct {
	kind string
	// build returns the model, its backbone not yet renamed.
	build func(t *testing.T) (*dc.Model, func())
	input cond.Input
	// victim is a backbone tensor (stored name) the error cases edit;
	// depthKey is the config field of the block count that names it.
	victim, depthKey string
}

func randomValues(rng *rand.Rand, v []float32) {
	for i := range v {
		v[i] = float32(0.2 * rng.NormFloat64())
	}
}

// tinyDiT is a DiT/2 with every weight random (adaLN-Zero too, so every
// block contributes).
func tinyDiT(t *testing.T) *dit.Model {
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 5, MLPRatio: 2, FrequencySize: 16}
	m, err := dit.Init(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomValues(rand.New(rand.NewPCG(3, 4)), m.Params.Data)
	return m
}

// tinyZImage is a Z-Image whose adaLN width (24) differs from its dim
// (32), with every weight random.
func tinyZImage(t *testing.T) *zimage.Model { return testckpt.RandomZImage(t, 5) }

// scaffoldAround grafts a fresh scaffold (random final layer, so outputs
// are not zero) around bb on an 8×8 grid.
func scaffoldAround(t *testing.T, bb dc.Backbone, in, out int) *dc.Model {
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups = 8, 4
	cfg, err := s.Config(in, out, 8, 8, bb.Width(), bb.CondWidth())
	if err != nil {
		t.Fatal(err)
	}
	ts := upcycle.InitScaffold(cfg, 9)
	rng := rand.New(rand.NewPCG(9, 10))
	for name, v := range ts {
		if strings.HasPrefix(name, "final_layer.") {
			randomValues(rng, v.Data)
		}
	}
	m, err := dc.New(cfg, ts, bb)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pretrainedCases() []pretrainedCase {
	feats := func(rows int, seed uint64) []float32 {
		v := make([]float32, rows*6)
		randomValues(rand.New(rand.NewPCG(seed, 1)), v)
		return v
	}
	return []pretrainedCase{
		{
			kind: checkpoint.KindDiT,
			build: func(t *testing.T) (*dc.Model, func()) {
				d := tinyDiT(t)
				return scaffoldAround(t, d, 4, 8), func() { d.PrefixNames(dc.BackbonePrefix) }
			},
			input:  cond.Input{T: []float32{17, 512}, Labels: []int{1, 5}},
			victim: "backbone.blocks.1.attn.qkv.weight", depthKey: "depth",
		},
		{
			kind: checkpoint.KindZImage,
			build: func(t *testing.T) (*dc.Model, func()) {
				z := tinyZImage(t)
				return scaffoldAround(t, zimage.NewBackbone(z), 4, 4), func() { z.PrefixNames(dc.BackbonePrefix) }
			},
			input: cond.Input{T: []float32{0.25, 0.9}, Captions: []cond.Caption{
				{Features: feats(3, 1), Len: 3}, {Features: feats(40, 2), Len: 37},
			}},
			victim: "backbone.layers.1.feed_forward.w2.weight", depthKey: "n_layers",
		},
	}
}

// predictWith runs a fixed latent batch through m under in at ρ 0 and 0.5.
func predictWith(t *testing.T, m *dc.Model, in cond.Input) []float32 {
	t.Helper()
	x := make([]float32, in.Samples()*m.Config.InChannels*m.Config.Tokens())
	randomValues(rand.New(rand.NewPCG(11, 12)), x)
	out, _, err := m.Predict(x, in, []float32{0, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A DC model around a DiT or a Z-Image saves and loads: the same config,
// the same parameters under the same names, the same outputs bit for bit,
// the backbone's tensors under dc.BackbonePrefix, and the same bytes when
// saved again. Its parameters join into one arena. A Z-Image's caption
// length for FLOPs survives the trip.
func TestRoundTripPretrainedKinds(t *testing.T) {
	for _, c := range pretrainedCases() {
		t.Run(c.kind, func(t *testing.T) {
			m, rename := c.build(t)
			rename()
			wantCaption, wantMultiple := 0, 0
			if zb, ok := m.Backbone.(*zimage.Backbone); ok {
				zb.CaptionLen, zb.ImageMultiple = 7, 1
				wantCaption, wantMultiple = 7, 1
			}
			want := predictWith(t, m, c.input)
			joint, err := upcycle.JoinParams(m)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(m.Params.List()) + len(m.Backbone.Parameters().List()); len(joint.List()) != n {
				t.Fatalf("joint arena holds %d parameters, want %d", len(joint.List()), n)
			}
			path := filepath.Join(t.TempDir(), "m.safetensors")
			info := checkpoint.Info{TrainedRhos: []float64{0, 0.5}}
			if err := checkpoint.Save(path, m, info); err != nil {
				t.Fatal(err)
			}
			got, meta, err := checkpoint.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			wantKind, wantCfg := m.Backbone.Spec().Kind(), m.Backbone.Spec().Settings()
			if kind, cfg := got.Backbone.Spec().Kind(), got.Backbone.Spec().Settings(); meta.Backbone.Kind != c.kind || kind != wantKind || !reflect.DeepEqual(cfg, wantCfg) {
				t.Errorf("backbone %s %+v, want %s %+v", kind, cfg, wantKind, wantCfg)
			}
			if !reflect.DeepEqual(*got.Config, *m.Config) {
				t.Errorf("scaffold config %+v, want %+v", *got.Config, *m.Config)
			}
			for _, part := range []struct{ got, want []string }{
				{names(got.Params.List()), names(m.Params.List())},
				{names(got.Backbone.Parameters().List()), names(m.Backbone.Parameters().List())},
			} {
				if !slices.Equal(part.got, part.want) {
					t.Errorf("parameter names %v, want %v", part.got, part.want)
				}
			}
			if !slices.Equal(got.Params.Data, m.Params.Data) || !slices.Equal(got.Backbone.Parameters().Data, m.Backbone.Parameters().Data) {
				t.Error("parameters differ after the round trip")
			}
			if out := predictWith(t, got, c.input); !slices.Equal(out, want) {
				t.Error("outputs differ after the round trip")
			}
			f, err := safetensors.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			shapes := meta.Shapes()
			for _, info := range f.Tensors() {
				_, scaffold := dc.ScaffoldShapes(m.Config)[info.Name]
				if !scaffold && !strings.HasPrefix(info.Name, dc.BackbonePrefix) {
					t.Errorf("backbone tensor %q is not under %q", info.Name, dc.BackbonePrefix)
				}
				if _, ok := shapes[info.Name]; !ok {
					t.Errorf("stored tensor %q is not in Shapes", info.Name)
				}
			}
			if len(f.Tensors()) != len(shapes) {
				t.Errorf("file holds %d tensors, Shapes lists %d", len(f.Tensors()), len(shapes))
			}
			f.Close()
			for _, n := range []int{16, 13} {
				if fl := meta.FLOPs([]int{n}); !(fl.Total() > 0) || fl.Total() != got.ForwardFLOPs([]int{n}).Total() || fl.Total() != m.ForwardFLOPs([]int{n}).Total() {
					t.Errorf("%d tokens: header FLOPs %g, loaded model's %g, saved model's %g", n, fl.Total(), got.ForwardFLOPs([]int{n}).Total(), m.ForwardFLOPs([]int{n}).Total())
				}
			}
			var capLen, multiple int
			if zs, ok := meta.Backbone.Spec.(zimage.Spec); ok {
				capLen, multiple = zs.CaptionLen, zs.ImageMultiple
			}
			if capLen != wantCaption || multiple != wantMultiple {
				t.Errorf("caption length %d and image token multiple %d after the trip, want %d and %d",
					capLen, multiple, wantCaption, wantMultiple)
			}
			if zs, ok := meta.Backbone.Spec.(zimage.Spec); ok {
				typical := *meta
				zs.CaptionLen = 0
				typical.Backbone.Spec = zs
				if !(typical.FLOPs([]int{16}).Total() > meta.FLOPs([]int{16}).Total()) {
					t.Error("FLOPs with 7-token captions are not below those with the typical prompt")
				}
			}
			again := filepath.Join(t.TempDir(), "again.safetensors")
			if err := checkpoint.Save(again, got, checkpoint.Info{TrainedRhos: meta.TrainedRhos}); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(path)
			b, _ := os.ReadFile(again)
			if !slices.Equal(a, b) {
				t.Error("re-saving the loaded model changed the file")
			}
		})
	}
}

func names(ps []*params.Param) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// A backbone that keeps its own names and was not renamed cannot be
// joined or saved; the errors name the clashing tensor and the prefix.
func TestUnrenamedBackboneRefused(t *testing.T) {
	for _, c := range pretrainedCases() {
		t.Run(c.kind, func(t *testing.T) {
			m, _ := c.build(t)
			_, err := upcycle.JoinParams(m)
			// DiT's x_embedder.proj is the scaffold's name; Z-Image's patch
			// embedding is x_embedder.weight, but its final layer clashes.
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q backbone's parameter", c.kind)) || !strings.Contains(err.Error(), `"backbone."`) {
				t.Errorf("JoinParams: %v, want an error naming the clashing parameter and the prefix", err)
			}
			err = checkpoint.Save(filepath.Join(t.TempDir(), "m.safetensors"), m, checkpoint.Info{})
			if err == nil || !strings.Contains(err.Error(), c.kind+` backbone parameter "`) || !strings.Contains(err.Error(), `"backbone."`) {
				t.Errorf("Save: %v, want an error naming the backbone parameter and the prefix", err)
			}
		})
	}
}

// A checkpoint of kind dit or zimage loads strictly: a missing, mis-shaped
// or unexpected backbone tensor, a block count that disagrees with the
// tensors, a config the backbone cannot run or that disagrees with the
// scaffold, and an unknown config field are errors that name the problem.
func TestLoadErrorsPretrainedKinds(t *testing.T) {
	for _, c := range pretrainedCases() {
		t.Run(c.kind, func(t *testing.T) {
			m, rename := c.build(t)
			rename()
			good := filepath.Join(t.TempDir(), "m.safetensors")
			if err := checkpoint.Save(good, m, checkpoint.Info{}); err != nil {
				t.Fatal(err)
			}
			meta, err := metaOf(good)
			if err != nil {
				t.Fatal(err)
			}
			shape := meta.Shapes()[c.victim]
			if len(shape) != 2 {
				t.Fatalf("victim %s has shape %v, want a matrix", c.victim, shape)
			}
			n := shape[0] * shape[1]
			backbone := func(cfg map[string]any) map[string]any {
				return cfg["backbone"].(map[string]any)["config"].(map[string]any)
			}
			cases := []struct {
				name string
				edit func(map[string]safetensors.WriteTensor, map[string]string)
				want []string
			}{
				{"missing tensor", func(ts map[string]safetensors.WriteTensor, _ map[string]string) { delete(ts, c.victim) },
					[]string{"edited.safetensors", fmt.Sprintf("tensor %q missing (want shape %v)", c.victim, shape)}},
				{"mis-shaped tensor", func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
					v := ts[c.victim]
					v.Shape = []int64{int64(n)}
					ts[c.victim] = v
				}, []string{fmt.Sprintf("tensor %q: shape [%d], want %v", c.victim, n, shape)}},
				{"unexpected tensor", func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
					ts["backbone.pos_embed"] = safetensors.WriteTensor{Name: "backbone.pos_embed", DType: ts[c.victim].DType, Shape: []int64{1}, Data: make([]byte, 4)}
				}, []string{`unexpected tensor "backbone.pos_embed" (shape [1])`}},
				{"depth disagrees", editConfig(t, func(cfg map[string]any) { backbone(cfg)[c.depthKey] = 3 }),
					[]string{"backbone " + c.depthKey + " = 3", "holds 2 numbered blocks"}},
				{"width disagrees", editConfig(t, func(cfg map[string]any) { cfg["scaffold"].(map[string]any)["cond_dim"] = 8 }),
					[]string{"cond_dim 8"}},
				{"unknown field", editConfig(t, func(cfg map[string]any) { backbone(cfg)["width"] = 32 }),
					[]string{`unknown field "width"`}},
				{"unrunnable config", editConfig(t, func(cfg map[string]any) {
					if c.kind == checkpoint.KindDiT {
						backbone(cfg)["num_heads"] = 3
					} else {
						backbone(cfg)["axes_dims"] = []int{4, 4, 4}
					}
				}), []string{"backbone config"}},
				{"size out of bounds", editConfig(t, func(cfg map[string]any) { backbone(cfg)["frequency_embedding_size"] = 1 << 20 }),
					[]string{"backbone frequency_embedding_size = 1048576, want at most"}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					_, _, err := checkpoint.Load(rewrite(t, good, tc.edit))
					if err == nil {
						t.Fatalf("no error, want one mentioning %q", tc.want)
					}
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not mention %q", err, w)
						}
					}
				})
			}
		})
	}
}

// metaOf reads and validates a checkpoint's metadata.
func metaOf(path string) (*checkpoint.Meta, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return checkpoint.ParseMeta(f.Metadata())
}

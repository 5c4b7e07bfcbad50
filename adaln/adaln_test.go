package adaln

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// arena allocates shapes under prefix, in name order, filled with N(0, 0.1²).
func arena(t *testing.T, prefix string, shapes map[string][]int) *params.Set {
	t.Helper()
	var specs []params.Spec
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		sh := shapes[name]
		cols := 1
		if len(sh) == 2 {
			cols = sh[1]
		}
		specs = append(specs, params.Spec{Name: prefix + name, Rows: sh[0], Cols: cols})
	}
	set, err := params.New(specs)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range set.Data {
		set.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	return set
}

func dense(rng *rand.Rand, rows, cols int) *mat.Dense[float32] {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v))
}

// BlockShapes and EmbedderShapes list exactly what ApplyBlock and
// Embedders read: on an arena of those tensors alone both run, and the
// gradient of their outputs reaches every tensor.
func TestShapesAreWhatTheyRead(t *testing.T) {
	const D, hidden, heads, freq, classes = 16, 24, 2, 8, 5
	rng := rand.New(rand.NewPCG(3, 4))
	offsets := []int{0, 3, 7}
	for _, tt := range []struct {
		what   string
		shapes map[string][]int
		run    func(set *params.Set) mat.Tensor
		rows   int
	}{
		{"block", BlockShapes(D, hidden), func(set *params.Set) mat.Tensor {
			return ApplyBlock(set, "layers.3.", heads, dense(rng, 7, D), dense(rng, 2, D), offsets)
		}, 7},
		{"embedders", EmbedderShapes(D, freq, classes), func(set *params.Set) mat.Tensor {
			return Embedders(set, "layers.3.", freq, []float32{0, 999}, []int{classes, 2})
		}, 2},
	} {
		t.Run(tt.what, func(t *testing.T) {
			set := arena(t, "layers.3.", tt.shapes)
			out := tt.run(set)
			if got := out.Shape(); got[0] != tt.rows || got[1] != D {
				t.Fatalf("output shape %v, want [%d %d]", got, tt.rows, D)
			}
			if err := ops.Backward(ops.Sum(out)); err != nil {
				t.Fatal(err)
			}
			for _, p := range set.List() {
				var norm float64
				for _, g := range p.Gradient() {
					norm += float64(g) * float64(g)
				}
				if !(norm > 0) || math.IsInf(norm, 0) {
					t.Errorf("%s: gradient norm² %g, want a positive finite one", p.Name, norm)
				}
			}
		})
	}
}

func TestParamGroups(t *testing.T) {
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"b.2.adaLN_modulation.1.weight", []string{params.GroupBackbone, params.GroupAdaLN}},
		{"b.2.attn.qkv.bias", []string{params.GroupBackbone, params.GroupAttention}},
		{"b.11.mlp.fc2.weight", []string{params.GroupBackbone, params.GroupMLP}},
		{"b.x.mlp.fc2.weight", nil},
		{"t_embedder.mlp.0.weight", []string{params.GroupEmbedders, params.GroupTimestepEmbedder}},
		{"y_embedder.embedding_table.weight", []string{params.GroupEmbedders, params.GroupClassEmbedder}},
		{"final_layer.linear.weight", nil},
	} {
		got := BlockParamGroups(tt.name, "b.")
		if got == nil {
			got = EmbedderParamGroups(tt.name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: groups %v, want %v", tt.name, got, tt.want)
		}
	}
	// Every tensor a block or the embedders hold has groups.
	for name := range BlockShapes(8, 8) {
		if BlockParamGroups("b.0."+name, "b.") == nil {
			t.Errorf("block tensor %s has no groups", name)
		}
	}
	for name := range EmbedderShapes(8, 8, 3) {
		if EmbedderParamGroups(name) == nil {
			t.Errorf("embedder tensor %s has no groups", name)
		}
	}
}

// PackedFLOPs is 2 per multiply-add of every tensor the blocks and the
// timestep MLP multiply by (BlockShapes' and EmbedderShapes' matrices but
// the label table, a gather), once per sample for those that read the
// conditioning and once per token for the rest, plus attention.
func TestPackedFLOPs(t *testing.T) {
	s := Sizes{Width: 16, Depth: 3, Heads: 2, MLPHidden: 24, FrequencySize: 8}
	for _, lengths := range [][]int{{5}, {5, 1, 9}, {0, 4}} {
		t.Run(fmt.Sprint(lengths), func(t *testing.T) {
			samples, tokens, pairs := float64(len(lengths)), 0.0, 0.0
			for _, l := range lengths {
				tokens += float64(l)
				pairs += float64(l * l)
			}
			var want float64
			for name, sh := range EmbedderShapes(s.Width, s.FrequencySize, 10) {
				if len(sh) == 2 && name != "y_embedder.embedding_table.weight" {
					want += 2 * samples * float64(sh[0]*sh[1])
				}
			}
			for name, sh := range BlockShapes(s.Width, s.MLPHidden) {
				if len(sh) != 2 {
					continue
				}
				rows := tokens
				if name == "adaLN_modulation.1.weight" {
					rows = samples
				}
				want += float64(s.Depth) * 2 * rows * float64(sh[0]*sh[1])
			}
			dh := float64(s.Width / s.Heads)
			want += float64(s.Depth*s.Heads) * pairs * (4*dh + 3)
			if got := PackedFLOPs(s, lengths); !fixtures.Within(math.Abs(got-want), 1e-12*want) {
				t.Errorf("PackedFLOPs %g, want %g", got, want)
			}
		})
	}
}

package zimage

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/loaders"
)

// A fresh model starts as DiT's initialisation does: zero output (the
// final projection is zero), norms one, identity blocks (zero
// modulation), and the same seed gives the same weights.
func TestInit(t *testing.T) {
	cfg := tinyConfig(true)
	m, err := Init(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want func(v float32) bool
	}{
		{"final_layer.linear.weight", func(v float32) bool { return v == 0 }},
		{"layers.0.adaLN_modulation.0.weight", func(v float32) bool { return v == 0 }},
		{"layers.1.attention_norm1.weight", func(v float32) bool { return v == 1 }},
		{"cap_embedder.0.weight", func(v float32) bool { return v == 1 }},
		{"layers.0.attention.qkv.bias", nil}, // absent: Z-Image's attention has no biases
	} {
		p, ok := m.Params.Lookup(c.name)
		if c.want == nil {
			if ok {
				t.Errorf("%s exists", c.name)
			}
			continue
		}
		if !ok {
			t.Fatalf("no %s", c.name)
		}
		for i, v := range p.Values() {
			if !c.want(v) {
				t.Fatalf("%s[%d] = %v", c.name, i, v)
			}
		}
	}
	qkv := m.Params.Get("layers.0.attention.qkv.weight").Values()
	bound := float32(math.Sqrt(6.0 / float64(3*cfg.Dim+cfg.Dim)))
	if lo, hi := slices.Min(qkv), slices.Max(qkv); !(lo >= -bound && hi <= bound && hi-lo >= bound) {
		t.Errorf("qkv weights in [%v, %v], want Xavier-uniform within ±%v", lo, hi, bound)
	}
	again, err := Init(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Params.Data, again.Params.Data) {
		t.Error("the same seed gave other weights")
	}
	out, err := m.Forward([]Latent{{Data: make([]float32, cfg.InChannels*4*4), F: 1, H: 4, W: 4}}, []float32{0.5}, [][]float32{make([]float32, 2*cfg.CapFeatDim)})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out[0] {
		if v != 0 {
			t.Fatalf("output[%d] = %v, want 0 from a fresh model", i, v)
		}
	}
}

// Save writes a folder that Load reads back to the same config and
// weights (values, when given, in place of the arena), with the metadata;
// a padding multiple of its own survives the trip.
func TestSaveLoad(t *testing.T) {
	for _, multiple := range []int{0, 4} {
		t.Run(fmt.Sprint(multiple), func(t *testing.T) { testSaveLoad(t, multiple) })
	}
}

func testSaveLoad(t *testing.T, multiple int) {
	cfg := tinyConfig(true)
	cfg.SeqMultiOf = multiple
	m, err := Init(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(i%13) / 13
	}
	ema := make([]float32, m.Params.Len())
	for i := range ema {
		ema[i] = float32(i%7) / 7
	}
	dir := t.TempDir() + "/model"
	for _, values := range [][]float32{nil, ema} {
		if err := Save(dir, m, values, map[string]string{"dcdit.recipe": "x"}); err != nil {
			t.Fatal(err)
		}
		w, err := Load(dir, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(w.Config, cfg) {
			t.Errorf("config %+v, want %+v", w.Config, cfg)
		}
		back, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Params.Data
		if values != nil {
			want = values
		}
		if !slices.Equal(back.Params.Data, want) {
			t.Error("the weights read back differ")
		}
		ck, err := loaders.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Metadata["dcdit.recipe"] != "x" {
			t.Errorf("metadata %v lacks dcdit.recipe", ck.Metadata)
		}
		ck.Close()
	}
	if err := Save(dir, m, make([]float32, 3), nil); err == nil {
		t.Error("saving 3 values for the whole model succeeded")
	}
}

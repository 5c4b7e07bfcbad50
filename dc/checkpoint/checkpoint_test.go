package checkpoint_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// predict runs a fixed batch through m at per-sample ρ and returns the
// output and the kept counts.
func predict(t *testing.T, m *dc.Model, frac []float32) ([]float32, []int) {
	t.Helper()
	cfg := m.Config
	B := len(frac)
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, B*cfg.InChannels*cfg.Tokens())
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	ts, ys := make([]float32, B), make([]int, B)
	for b := range B {
		ts[b], ys[b] = float32(100*b+17), b
	}
	out, res, err := m.Predict(x, cond.Input{T: ts, Labels: ys}, frac)
	if err != nil {
		t.Fatal(err)
	}
	return out, res.Chunks.NumKept
}

// Saving and loading gives the same config, the same parameters bit for
// bit and the same outputs, at every ρ.
func TestRoundTrip(t *testing.T) {
	fixtures.Run(t, dctest.Kind, func(t *testing.T, c fixtures.Case) {
		m, rhos := dctest.Model(t, c)
		path := filepath.Join(t.TempDir(), "m.safetensors")
		base := &checkpoint.Base{Path: "base.pt", Architecture: "dit", Layout: "original", Size: 123, ModTime: "2025-01-02T03:04:05Z"}
		info := checkpoint.Info{TrainedRhos: rhos, Recipe: "[model]\nname = \"tiny\"\n", Base: base}
		if err := checkpoint.Save(path, m, info); err != nil {
			t.Fatal(err)
		}
		got, meta, err := checkpoint.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got.Config, *m.Config) {
			t.Errorf("scaffold config %+v, want %+v", *got.Config, *m.Config)
		}
		orig := m.Backbone.Spec().Settings()
		wantNet := *orig.(*hnet.Config)
		wantNet.PatchSize = max(wantNet.PatchSize, 1)
		if kind, net := got.Backbone.Spec().Kind(), got.Backbone.Spec().Settings(); kind != hnet.Kind || !reflect.DeepEqual(net, &wantNet) {
			t.Errorf("backbone %s %+v, want hnet %+v", kind, net, wantNet)
		}
		if meta.Recipe != info.Recipe || !reflect.DeepEqual(meta.Base, base) || !slices.Equal(meta.TrainedRhos, rhos) || meta.FormatVersion != 1 || meta.Backbone.Kind != "hnet" {
			t.Errorf("meta %+v", meta)
		}
		if !slices.Equal(got.Params.Data, m.Params.Data) || !slices.Equal(got.Backbone.Parameters().Data, m.Backbone.Parameters().Data) {
			t.Error("parameters differ after the round trip")
		}
		for _, frac := range [][]float32{{0, 0}, {0.3, 0.3}, {0.6, 0.6}, {0, 0.9}} {
			want, wantKept := predict(t, m, frac)
			out, kept := predict(t, got, frac)
			if !slices.Equal(out, want) || !slices.Equal(kept, wantKept) {
				t.Errorf("ρ %v: outputs or kept counts %v differ from the original's %v", frac, kept, wantKept)
			}
		}
		// Saving the loaded model again gives the same bytes.
		again := filepath.Join(t.TempDir(), "again.safetensors")
		if err := checkpoint.Save(again, got, checkpoint.Info{TrainedRhos: meta.TrainedRhos, Recipe: meta.Recipe, Base: meta.Base}); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(path)
		b, _ := os.ReadFile(again)
		if !slices.Equal(a, b) {
			t.Error("re-saving the loaded model changed the file")
		}
		// No temporary file is left next to it.
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Errorf("folder holds %d entries after saving, want 1", len(entries))
		}
	})
}

// The metadata is what the package documentation says.
func TestMetadataLayout(t *testing.T) {
	path := dctest.Checkpoint(t)
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata()
	var raw map[string]any
	if err := json.Unmarshal([]byte(md["dcdit.config"]), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format_version", "scaffold", "backbone", "trained_rhos", "recipe", "base"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("dcdit.config lacks %q: %s", k, md["dcdit.config"])
		}
	}
	bb := raw["backbone"].(map[string]any)
	cfg := bb["config"].(map[string]any)
	if bb["kind"] != "hnet" || cfg["heads"] == nil || cfg["patch_size"] != 1.0 {
		t.Errorf("backbone %v: want kind hnet with heads and patch_size 1", bb)
	}
	if md["format"] != "pt" || md["dcdit.crc32c"] == "" {
		t.Errorf("metadata %v", md)
	}
	for _, info := range f.Tensors() {
		if info.Name == "pos_embed" || info.DType.String() != "F32" {
			t.Errorf("tensor %s %s: pos_embed is not stored and everything is F32", info.Name, info.DType)
		}
	}
}

// rewrite copies a checkpoint, letting edit change its tensors and
// metadata.
func rewrite(t *testing.T, src string, edit func(ts map[string]safetensors.WriteTensor, md map[string]string)) string {
	t.Helper()
	f, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := map[string]safetensors.WriteTensor{}
	for _, info := range f.Tensors() {
		tn, _ := f.Tensor(info.Name)
		raw, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		ts[info.Name] = safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: slices.Clone(info.Shape), Data: slices.Clone(raw)}
	}
	md := map[string]string{}
	for k, v := range f.Metadata() {
		md[k] = v
	}
	edit(ts, md)
	var list []safetensors.WriteTensor
	for _, tn := range ts {
		list = append(list, tn)
	}
	dst := filepath.Join(t.TempDir(), "edited.safetensors")
	if err := safetensors.Write(dst, list, md); err != nil {
		t.Fatal(err)
	}
	return dst
}

// editConfig changes the dcdit.config JSON through a generic map.
func editConfig(t *testing.T, edit func(cfg map[string]any)) func(map[string]safetensors.WriteTensor, map[string]string) {
	return func(_ map[string]safetensors.WriteTensor, md map[string]string) {
		var cfg map[string]any
		if err := json.Unmarshal([]byte(md["dcdit.config"]), &cfg); err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		md["dcdit.config"] = string(raw)
	}
}

// Every malformed checkpoint fails with an error naming the file and the
// problem: what was expected and what was found.
func TestLoadErrors(t *testing.T) {
	good := dctest.Checkpoint(t)
	const victim = "hnet.decoder.layers.0.conv2.bias"
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(data []byte) string {
		p := filepath.Join(t.TempDir(), "raw.safetensors")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := slices.Clone(raw)
	flipped[len(flipped)-3] ^= 0x40
	backbone := func(cfg map[string]any) map[string]any {
		return cfg["backbone"].(map[string]any)["config"].(map[string]any)
	}
	// The victim's shape and the backbone's width come from the checkpoint
	// (the fixture case's sizes), so the edits below are wrong for any case.
	f, err := safetensors.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	vt, ok := f.Tensor(victim)
	var goodCfg map[string]any
	jerr := json.Unmarshal([]byte(f.Metadata()["dcdit.config"]), &goodCfg)
	f.Close()
	if !ok || len(vt.Shape) != 1 || vt.Shape[0] < 2 || jerr != nil {
		t.Fatalf("%s: want a 1-D %s of 2 or more values and a dcdit.config (%v)", good, victim, jerr)
	}
	n := vt.Shape[0]
	width, _ := backbone(goodCfg)["width"].(float64)
	if !(width > 0) {
		t.Fatalf("%s: dcdit.config has no backbone width", good)
	}
	badHeads := 3 // the smallest head count that does not divide the width
	for int(width)%badHeads == 0 {
		badHeads++
	}
	cases := []struct {
		name string
		path func() string
		want []string
	}{
		{"truncated", func() string { return write(raw[:len(raw)-100]) }, []string{"raw.safetensors"}},
		{"header only", func() string { return write(raw[:40]) }, []string{"raw.safetensors"}},
		{"corrupted data", func() string { return write(flipped) }, []string{"raw.safetensors", "CRC-32C", "corrupted"}},
		{"no metadata", func() string {
			return rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, "dcdit.config") })
		}, []string{"edited.safetensors", `"dcdit.config"`, "not a DC checkpoint"}},
		{"bad JSON", func() string {
			return rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { md["dcdit.config"] = "{scaffold" })
		}, []string{"edited.safetensors", "not a JSON object"}},
		{"no format_version", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { delete(c, "format_version") }))
		}, []string{"format_version missing"}},
		{"future format_version", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { c["format_version"] = 2 }))
		}, []string{"unknown format_version 2", "reads 1"}},
		{"unknown backbone kind", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { c["backbone"].(map[string]any)["kind"] = "unet" }))
		}, []string{`unknown backbone kind "unet"`, "dit, hnet, zimage"}},
		{"unknown field", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { c["scaffold"].(map[string]any)["sigma"] = 1 }))
		}, []string{`unknown field "sigma"`}},
		{"unknown backbone field", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { backbone(c)["num_heads"] = 4 }))
		}, []string{`unknown field "num_heads"`}},
		{"heads do not divide", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { backbone(c)["heads"] = badHeads }))
		}, []string{fmt.Sprintf("%d heads", badHeads)}},
		{"widths disagree", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { backbone(c)["width"] = 2 * width }))
		}, []string{fmt.Sprintf("backbone width %d", 2*int(width)), "model_dim"}},
		{"bad rho", func() string {
			return rewrite(t, good, editConfig(t, func(c map[string]any) { c["trained_rhos"] = []float64{0, 1} }))
		}, []string{"trained_rhos", "0 ≤ ρ < 1"}},
		{"missing tensor", func() string {
			return rewrite(t, good, func(ts map[string]safetensors.WriteTensor, _ map[string]string) { delete(ts, victim) })
		}, []string{"edited.safetensors", `tensor "` + victim + `" missing`, fmt.Sprintf("want shape [%d]", n)}},
		{"mis-shaped tensor", func() string {
			return rewrite(t, good, func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
				v := ts[victim]
				v.Shape, v.Data = []int64{n / 2}, v.Data[:4*(n/2)]
				ts[victim] = v
			})
		}, []string{fmt.Sprintf(`tensor %q: shape [%d], want [%d]`, victim, n/2, n)}},
		{"unexpected tensor", func() string {
			return rewrite(t, good, func(ts map[string]safetensors.WriteTensor, _ map[string]string) {
				ts["pos_embed"] = safetensors.WriteTensor{Name: "pos_embed", DType: ts[victim].DType, Shape: []int64{1}, Data: make([]byte, 4)}
			})
		}, []string{`unexpected tensor "pos_embed" (shape [1])`}},
		{"integer tensor", func() string {
			return rewrite(t, good, func(ts map[string]safetensors.WriteTensor, md map[string]string) {
				v := ts[victim]
				v.DType = dtype.I32
				ts[victim] = v
				delete(md, "dcdit.crc32c")
			})
		}, []string{`tensor "` + victim + `": dtype I32`}},
		{"bad checksum JSON", func() string {
			return rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { md["dcdit.crc32c"] = "[1]" })
		}, []string{`"dcdit.crc32c"`, "not a JSON object"}},
		{"checksum missing for a tensor", func() string {
			return rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) {
				var sums map[string]string
				json.Unmarshal([]byte(md["dcdit.crc32c"]), &sums)
				delete(sums, victim)
				b, _ := json.Marshal(sums)
				md["dcdit.crc32c"] = string(b)
			})
		}, []string{"no checksum", victim}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := checkpoint.Load(c.path())
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", c.want)
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Without checksums the format is still readable (other writers).
	plain := rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, "dcdit.crc32c") })
	if _, _, err := checkpoint.Load(plain); err != nil {
		t.Errorf("a checkpoint without checksums: %v", err)
	}
}

// FLOPs per ρ come from the header alone, fall with ρ, and keep the
// floored count of the assumed 1/N of the tokens.
func TestFLOPsPerRho(t *testing.T) {
	path := dctest.Checkpoint(t)
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := checkpoint.ParseMeta(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	rows := meta.FLOPsPerRho(250)
	if len(rows) != len(meta.TrainedRhos) {
		t.Fatalf("%d rows for trained ρ %v", len(rows), meta.TrainedRhos)
	}
	L, N := meta.Scaffold.Tokens(), meta.Scaffold.TargetN
	m, _, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		natural := int(float64(L) / N)
		if want := natural - int(float32(natural)*float32(r.Rho)); r.KeptTokens != want {
			t.Errorf("ρ %v: %d kept, want %d", r.Rho, r.KeptTokens, want)
		}
		if want := m.ForwardFLOPs([]int{r.KeptTokens}).Total() / 1e9; r.GFLOPs != want {
			t.Errorf("ρ %v: %v GFLOP, the loaded model counts %v", r.Rho, r.GFLOPs, want)
		}
		if i > 0 && !(r.GFLOPs < rows[i-1].GFLOPs && r.KeptTokens < rows[i-1].KeptTokens) {
			t.Errorf("ρ %v costs %v GFLOP keeping %d, not less than ρ %v", r.Rho, r.GFLOPs, r.KeptTokens, rows[i-1].Rho)
		}
		if r.TFLOPsPerImage != r.GFLOPs*250/1e3 {
			t.Errorf("ρ %v: %v TFLOP per image at 250 steps, want %v", r.Rho, r.TFLOPsPerImage, r.GFLOPs*0.25)
		}
	}
	meta.TrainedRhos = nil
	if rows := meta.FLOPsPerRho(1); len(rows) != 3 || rows[1].Rho != 0.3 {
		t.Errorf("default ρ rows %+v, want 0, 0.3, 0.6", rows)
	}
}

func TestAssumedKept(t *testing.T) {
	cases := []struct {
		L      int
		N, rho float64
		want   int
	}{
		{256, 4, 0, 64}, {256, 4, 0.3, 45}, {256, 4, 0.6, 26}, {1024, 4, 0.6, 103}, {10, 4, 0.5, 1}, {3, 4, 0, 1}, {256, 3.5, 0, 73}, {1, 4, 0.9, 1},
	}
	for _, c := range cases {
		if got := dc.AssumedKept(c.L, c.N, c.rho); got != c.want {
			t.Errorf("AssumedKept(%d, %v, %v) = %d, want %d", c.L, c.N, c.rho, got, c.want)
		}
	}
}

// A DC checkpoint also loads from a folder holding it (loaders.Open's
// forms), and DescribeBase identifies a base checkpoint by its files.
func TestLoadFolderAndDescribeBase(t *testing.T) {
	path := dctest.Checkpoint(t)
	dir := filepath.Join(t.TempDir(), "dc-model")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, meta, err := checkpoint.Load(dir); err != nil || meta.Backbone.Kind != "hnet" {
		t.Errorf("loading the folder: %v", err)
	}

	b, err := checkpoint.DescribeBase(path, true)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if b.Architecture != "dcdit" || b.Layout != "dcdit" || b.Size != int64(len(raw)) || b.SHA256 != hex.EncodeToString(sum[:]) || b.ModTime == "" {
		t.Errorf("base %+v", b)
	}
	if b, err := checkpoint.DescribeBase(path, false); err != nil || b.SHA256 != "" || b.Size != int64(len(raw)) {
		t.Errorf("base without hash %+v, %v", b, err)
	}
	if _, err := checkpoint.DescribeBase(filepath.Join(dir, "nope.pt"), false); err == nil || !strings.Contains(err.Error(), "nope.pt") {
		t.Errorf("missing base: %v", err)
	}
}

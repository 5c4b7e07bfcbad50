package official_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dc/hnet/official"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/pytorch"
)

// mustExport exports src to pt, failing the test on an error, warning or
// anything left out.
func mustExport(t *testing.T, src, pt string) {
	t.Helper()
	warnings, unheld, err := official.ExportFile(src, pt, false)
	if err != nil || len(warnings) > 0 || len(unheld) > 0 {
		t.Fatalf("export: %v (warnings %q, left out %q)", err, warnings, unheld)
	}
}

// The sampling settings a checkpoint records, and the spread drop, have no
// place in the official files: the export leaves them out and says so.
func TestExportLeavesOutSampling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread bool
		want   []string
	}{
		{"sampling settings", false, []string{"sampling settings (ddpm, 25 steps, cfg 4, dense below t = 600)"}},
		{"and the spread drop", true, []string{"the spread drop", "sampling settings (ddpm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rhos := dctest.Model(t, dctest.Cases(t)[0])
			m.Config.SpreadDrop = tc.spread
			dir := t.TempDir()
			src := filepath.Join(dir, "dc.safetensors")
			rec := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 600, CFG: 4, Steps: 25}
			if err := checkpoint.Save(src, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
				t.Fatal(err)
			}
			warnings, unheld, err := official.ExportFile(src, filepath.Join(dir, "official.pt"), false)
			if err != nil || len(warnings) > 0 || len(unheld) != len(tc.want) {
				t.Fatalf("export: %v, warnings %q, left out %q: want %q named", err, warnings, unheld, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(unheld[i], w) {
					t.Errorf("left out %q, want %q", unheld[i], w)
				}
			}
		})
	}
}

// A DC checkpoint exported to the official files and imported back is the
// same model, bit for bit; the state dict has exactly the reference's
// tensors (names and shapes: strict loading), its pos_embed the
// reference's own values; the config says what the model is. A model
// whose blocks were upcycled from a DiT/2 (position table on the patch
// grid) comes back as one.
func TestRoundTrip(t *testing.T) {
	for _, c := range dctest.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m, rhos := dctest.Model(t, c)
			dir := t.TempDir()
			src := filepath.Join(dir, "dc.safetensors")
			if err := checkpoint.Save(src, m, checkpoint.Info{TrainedRhos: rhos}); err != nil {
				t.Fatal(err)
			}
			pt := filepath.Join(dir, "official.pt")
			mustExport(t, src, pt)

			ref, err := loaders.ReadSafetensors(filepath.Join(c.Dir, "weights.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := pytorch.Open(pt)
			if err != nil {
				t.Fatal(err)
			}
			if f.Selected != "" || len(f.Tensors) != len(ref) {
				t.Fatalf("exported %d tensors (selected %q), the reference state dict has %d", len(f.Tensors), f.Selected, len(ref))
			}
			for _, tt := range f.Tensors {
				r, ok := ref[tt.Name]
				shape := make([]int, len(tt.Shape))
				for i, d := range tt.Shape {
					shape[i] = int(d)
				}
				if !ok || !slices.Equal(shape, r.Shape) {
					t.Errorf("tensor %q %v: the reference has %v (present: %v)", tt.Name, shape, r.Shape, ok)
				}
			}
			back := filepath.Join(dir, "back.safetensors")
			if err := official.ImportFile(pt, official.ConfigPath(pt), back, 0); err != nil {
				t.Fatal(err)
			}
			m2, meta2, err := checkpoint.Load(back)
			if err != nil {
				t.Fatal(err)
			}
			if *m2.Config != *m.Config {
				t.Errorf("config after the round trip:\n%+v\nwant\n%+v", *m2.Config, *m.Config)
			}
			if !slices.Equal(meta2.TrainedRhos, rhos) && len(rhos) > 1 {
				t.Errorf("trained ρ %v, want %v", meta2.TrainedRhos, rhos)
			}
			same(t, m2.Params.List(), m.Params.List())
			same(t, m2.Backbone.Parameters().List(), m.Backbone.Parameters().List())

			// pos_embed: the exported table is the reference's, bit for bit.
			pd, err := os.ReadFile(pt)
			if err != nil {
				t.Fatal(err)
			}
			for _, tt := range f.Tensors {
				if tt.Name != "pos_embed" {
					continue
				}
				r := ref["pos_embed"].Data
				for i := range r {
					off := tt.FileOffset + 4*(tt.StorageOffset+int64(i))
					got := math.Float32frombits(uint32(pd[off]) | uint32(pd[off+1])<<8 | uint32(pd[off+2])<<16 | uint32(pd[off+3])<<24)
					if got != r[i] {
						t.Fatalf("pos_embed[%d] = %v, the reference's %v", i, got, r[i])
					}
				}
			}

			// Without a config: the shapes from the tensors, the head count given.
			back3 := filepath.Join(dir, "heads.safetensors")
			if err := official.ImportFile(pt, "", back3, m.Backbone.(*hnet.Network).Config.Heads); err != nil {
				t.Fatal(err)
			}
			m3, _, err := checkpoint.Load(back3)
			if err != nil {
				t.Fatal(err)
			}
			same(t, m3.Params.List(), m.Params.List())
			same(t, m3.Backbone.Parameters().List(), m.Backbone.Parameters().List())
			if err := official.ImportFile(pt, "", filepath.Join(dir, "none.safetensors"), 0); err == nil || !strings.Contains(err.Error(), "--num-heads") {
				t.Errorf("a bare state dict without config or heads: %v", err)
			}

			net, ok := m.Backbone.(*hnet.Network)
			if !ok {
				t.Fatalf("backbone %T, want the hnet network", m.Backbone)
			}
			net.Config.PatchSize = 2
			src2, pt2, back2 := filepath.Join(dir, "dc2.safetensors"), filepath.Join(dir, "official2.pt"), filepath.Join(dir, "back2.safetensors")
			if err := checkpoint.Save(src2, m, checkpoint.Info{TrainedRhos: rhos}); err != nil {
				t.Fatal(err)
			}
			mustExport(t, src2, pt2)
			if err := official.ImportFile(pt2, official.ConfigPath(pt2), back2, 0); err != nil {
				t.Fatal(err)
			}
			if _, meta, err := checkpoint.Load(back2); err != nil || meta.Backbone.Config().(*hnet.Config).PatchSize != 2 {
				t.Fatalf("a DiT/2-upcycled model came back with position patch %v (%v), want 2", meta.Backbone.Config(), err)
			}
		})
	}
}

func same[P interface {
	comparable
	Values() []float32
}](t *testing.T, got, want []P) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d parameters, want %d", len(got), len(want))
	}
	for i := range got {
		a, b := got[i].Values(), want[i].Values()
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("parameter %d value %d: %v after the round trip, %v before", i, j, a[j], b[j])
			}
		}
	}
}

// Export refuses what the official model cannot hold, naming each
// setting; import refuses a config that does not describe the tensors,
// naming each difference.
func TestRefusals(t *testing.T) {
	src := dctest.Checkpoint(t)
	_, meta, err := checkpoint.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(m *checkpoint.Meta)
		want []string
	}{
		{"dcdit's scaffold options", func(m *checkpoint.Meta) {
			m.Scaffold.PatchSize, m.Scaffold.WideHead, m.Scaffold.NoEncoderNorm = 2, true, true
			m.Scaffold.RelativeResidual, m.Scaffold.LatentSkip, m.Scaffold.TokenEmbedder, m.Scaffold.DroppedContext = true, true, true, true
		}, []string{"patch_size 2", "wide head", "no encoder RMSNorm", "relative residual", "latent skip", "token embedder", "dropped context"}},
		{"group counts", func(m *checkpoint.Meta) { m.Scaffold.NormGroups = 8 }, []string{"norm_groups 8 (official: 32)"}},
		{"a rectangle", func(m *checkpoint.Meta) { m.Scaffold.GridCols++ }, []string{"grid (the official model is square)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := *meta
			tt.edit(&m)
			_, _, err := official.ConfigOf(&m, false)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// --force writes a model whose group counts differ, saying so.
	m := *meta
	m.Scaffold.NormGroups = 8
	if _, warnings, err := official.ConfigOf(&m, true); err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "norm_groups 8") {
		t.Errorf("forced: %v, warnings %q", err, warnings)
	}

	dir := t.TempDir()
	pt := filepath.Join(dir, "official.pt")
	mustExport(t, src, pt)
	if _, _, err := official.ExportFile(src, pt, false); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("export over an existing file: %v", err)
	}
	cfg, err := os.ReadFile(official.ConfigPath(pt))
	if err != nil {
		t.Fatal(err)
	}
	// Each edit breaks one thing the tensors fix, whatever the case's sizes.
	line := func(text, key, value string) string {
		i := strings.Index(text, key+": ")
		if i < 0 {
			t.Fatalf("the exported config has no %q:\n%s", key, text)
		}
		j := i + strings.IndexByte(text[i:], '\n')
		return text[:i] + key + ": " + value + text[j:]
	}
	flip := func(text string) string {
		if strings.Contains(text, "learn_sigma: true") {
			return strings.Replace(text, "learn_sigma: true", "learn_sigma: false", 1)
		}
		return strings.Replace(text, "learn_sigma: false", "learn_sigma: true", 1)
	}
	for _, tt := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"image size", func(s string) string { return line(s, "image_size", "8") }, "latent grid side (image_size / 8): config 1, tensors"},
		{"layout", func(s string) string { return strings.Replace(s, `arch_layout: ["c`, `arch_layout: ["c9`, 1) }, "encoder conv blocks (arch_layout): config 9"},
		{"learned sigma", flip, "output channels (learn_sigma)"},
		{"unequal widths", func(s string) string { return strings.Replace(s, "d_model: [", "d_model: [7, ", 1) }, "model.hnet.d_model is"},
		{"no null class", func(s string) string { return line(s, "class_dropout_prob", "0.0") }, "no null-class row"},
		{"two stages", func(s string) string { return line(s, "arch_layout", `["c2", ["c2", ["D2"], "c2"], "c2"]`) }, "model.hnet.arch_layout is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edited := filepath.Join(t.TempDir(), "edited.yaml")
			if err := os.WriteFile(edited, []byte(tt.edit(string(cfg))), 0o644); err != nil {
				t.Fatal(err)
			}
			err := official.ImportFile(pt, edited, filepath.Join(t.TempDir(), "back.safetensors"), 0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("import: %v, want it to say %q", err, tt.want)
			}
		})
	}
}

package dcfile_test

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/dcfile"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dc/hnet/official"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

const testdata = "../../testdata"

// Every DC model file opens to the same model: the DC checkpoint, the bare
// official state dict with a head count, and the official files exported
// with their config. What each file does not store is assumed and said,
// or refused when it must be given.
func TestOpen(t *testing.T) {
	ckpt := dctest.Checkpoint(t)
	want, wantMeta, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	heads := want.Backbone.Spec().Settings().(*hnet.Config).Heads
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	pt := filepath.Join(t.TempDir(), "dc-dit.pt")
	if _, _, err := official.ExportFile(ckpt, pt, false); err != nil {
		t.Fatal(err)
	}
	sigma := want.Config.Sigma
	for _, c := range []struct {
		name     string
		path     string
		opts     dcfile.Options
		format   dcfile.Format
		trained  []float64
		warnings []string // each a substring of one warning, in order
		err      string
		notDC    bool
	}{
		{name: "DC checkpoint", path: ckpt, format: dcfile.DC, trained: wantMeta.TrainedRhos},
		{name: "state dict", path: ref, opts: dcfile.Options{Heads: heads, Sigma: sigma}, format: dcfile.Official},
		{name: "state dict, σ assumed", path: ref, opts: dcfile.Options{Heads: heads}, format: dcfile.Official, warnings: []string{"de-chunk σ"}},
		{name: "state dict without heads", path: ref, err: "pass --num-heads"},
		{name: "official files", path: pt, format: dcfile.Official, trained: wantMeta.TrainedRhos},
		{name: "official files, the same heads", path: pt, opts: dcfile.Options{Heads: heads}, format: dcfile.Official, trained: wantMeta.TrainedRhos},
		{name: "official files, other heads", path: pt, opts: dcfile.Options{Heads: heads + 1}, err: "dc-dit.yaml states"},
		{name: "a DiT", path: filepath.Join(testdata, "checkpoints", "dit-original.safetensors"), err: "holds a dit checkpoint", notDC: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, h, err := dcfile.Open(c.path, c.opts)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || errors.Is(err, dcfile.ErrNotDC) != c.notDC {
					t.Fatalf("err = %v, want one containing %q (ErrNotDC: %v)", err, c.err, c.notDC)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Format != c.format || !slices.Equal(h.Meta.TrainedRhos, c.trained) || h.Meta.Sampling != nil {
				t.Errorf("format %s, trained ρ %v, sampling %v; want %s, %v, none", h.Format, h.Meta.TrainedRhos, h.Meta.Sampling, c.format, c.trained)
			}
			checkWarnings(t, h.Meta.Warnings, c.warnings)
			if m.Config.Sigma != sigma || m.Backbone.Spec().Settings().(*hnet.Config).Heads != heads {
				t.Errorf("σ %v, heads %v; want %v, %d", m.Config.Sigma, m.Backbone.Spec().Settings(), sigma, heads)
			}
			for _, p := range slices.Concat(want.Params.List(), want.Backbone.Parameters().List()) {
				q, ok := m.Params.Lookup(p.Name)
				if !ok {
					q, ok = m.Backbone.Parameters().Lookup(p.Name)
				}
				if !ok || !slices.Equal(q.Values(), p.Values()) {
					t.Fatalf("tensor %s differs from the DC checkpoint's", p.Name)
				}
			}
		})
	}
}

// checkWarnings fails unless warnings holds one warning per substring of
// want, in order.
func checkWarnings(t *testing.T, warnings, want []string) {
	t.Helper()
	ok := len(warnings) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.Contains(warnings[i], want[i])
	}
	if !ok {
		t.Errorf("warnings %q, want one containing each of %q", warnings, want)
	}
}

// A header prices and describes a file without its tensor data: the
// official state dict's head count is given, taken from a preset of its
// width and depth, assumed 64 wide, or unknown; its sizes and the FLOPs
// they give are the DC checkpoint's.
func TestReadHeader(t *testing.T) {
	ckpt := dctest.Checkpoint(t)
	_, wantMeta, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	heads := wantMeta.Backbone.Spec.Settings().(*hnet.Config).Heads
	width := wantMeta.Scaffold.ModelDim
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	preset := presetStateDict(t, dc.Presets[0])
	for _, c := range []struct {
		name       string
		path       string
		opts       dcfile.Options
		heads      int
		preset     string
		warnings   []string
		sameFLOPs  bool
		withoutPos bool
	}{
		{name: "DC checkpoint", path: ckpt, heads: heads, sameFLOPs: true},
		{name: "heads given", path: ref, opts: dcfile.Options{Heads: heads}, heads: heads, warnings: []string{"target N"}, sameFLOPs: true},
		{name: "heads unknown", path: ref, warnings: []string{"target N"}},
		{name: "heads assumed", path: ref, opts: dcfile.Options{GuessHeads: true}, heads: max(1, width/64), warnings: []string{"64-wide heads", "target N"}},
		{name: "heads of a preset", path: preset, opts: dcfile.Options{GuessHeads: true}, heads: dc.Presets[0].Heads, preset: dc.Presets[0].Name, warnings: []string{"target N"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck, err := loaders.Open(c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			h, err := dcfile.ReadHeader(ck, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := h.Meta.Backbone.Spec.Settings().(*hnet.Config).Heads
			if got != c.heads || h.HeadsUnknown != (c.heads == 0) || h.Preset != c.preset {
				t.Errorf("heads %d (unknown: %v), preset %q; want %d, %q", got, h.HeadsUnknown, h.Preset, c.heads, c.preset)
			}
			checkWarnings(t, h.Meta.Warnings, c.warnings)
			shapes := ck.Shapes()
			for name, shape := range h.Expected {
				if !slices.Equal(shapes[name], shape) {
					t.Errorf("expected tensor %s %v, the file holds %v", name, shape, shapes[name])
				}
			}
			if !c.sameFLOPs {
				return
			}
			kept := []int{wantMeta.Scaffold.Cells() / 2}
			if got, want := h.Meta.FLOPs(kept).Total(), wantMeta.FLOPs(kept).Total(); !(math.Abs(got-want) <= 1e-12*want) {
				t.Errorf("%v FLOPs at %v kept tokens, the DC checkpoint %v", got, kept, want)
			}
		})
	}
	ck, err := loaders.Open(filepath.Join(testdata, "checkpoints", "dit-original.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := dcfile.ReadHeader(ck, dcfile.Options{}); !errors.Is(err, dcfile.ErrNotDC) {
		t.Errorf("a DiT's header: err = %v, want ErrNotDC", err)
	}
}

// presetStateDict writes a header-only official state dict of preset p's
// sizes (its data a hole) and returns its path.
func presetStateDict(t *testing.T, p dc.Preset) string {
	t.Helper()
	sp, _ := dc.LookupPreset(p.Name)
	meta := &checkpoint.Meta{Scaffold: *sp.Config(32), Backbone: checkpoint.Backbone{Kind: hnet.Kind, Spec: hnet.Spec{Config: hnet.PresetConfig(p)}}}
	shapes := meta.Shapes()
	shapes["pos_embed"] = []int{1, meta.Scaffold.Tokens(), meta.Scaffold.ModelDim}
	var ts []safetensors.WriteTensor
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		sh := make([]int64, len(shapes[name]))
		for i, d := range shapes[name] {
			sh[i] = int64(d)
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: sh})
	}
	path, err := testckpt.WriteSparseTensors(t.TempDir(), "model", ts, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

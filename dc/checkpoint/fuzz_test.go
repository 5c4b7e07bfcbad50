package checkpoint_test

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// FuzzMetadata parses arbitrary dcdit.config and dcdit.crc32c texts as
// Load and inspect do, against the tensor names of a real DC checkpoint:
// no panic, every error one line of bounded length, and a config that
// passes every check describes a bounded model (its expected tensor list
// and FLOPs are computed, as inspect does from the headers alone) and
// bounded sampling settings.
func FuzzMetadata(f *testing.F) {
	file, err := safetensors.Open(dctest.Checkpoint(f))
	if err != nil {
		f.Fatal(err)
	}
	md := file.Metadata()
	found := map[string][]int{}
	for _, t := range file.Tensors() {
		shape := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int(d)
		}
		found[t.Name] = shape
	}
	file.Close()
	cfg, sums := md[checkpoint.ConfigKey], md[checkpoint.ChecksumKey]
	f.Add(cfg, sums)
	f.Add(strings.Replace(cfg, `"grid_rows":`, `"grid_rows":100000,"x":`, 1), `{}`)
	f.Add(strings.Replace(cfg, `"depth":`, `"depth":100000,"x":`, 1), `{"a":"0000000g"}`)
	f.Add(strings.Replace(cfg, `"heads":`, `"heads":3,"x":`, 1), `[]`)
	f.Add(`{"format_version":1}`, `null`)
	rec := `"sampling":{"process":"flow_matching","dense_below":600,"cfg":4,"sampling_steps":25,"shift":3},"trained_rhos":`
	f.Add(strings.Replace(cfg, `"trained_rhos":`, rec, 1), sums)
	f.Add(strings.Replace(cfg, `"trained_rhos":`, `"sampling":{"process":"ddpm","dense_below":-0,"cfg":1e308,"sampling_steps":99999,"x":1},"trained_rhos":`, 1), sums)
	f.Add(strings.Replace(cfg, `"trained_rhos":`, `"sampling":{"process":"ddpm","dense_below":NaN,"cfg":4,"sampling_steps":25},"trained_rhos":`, 1), sums)
	f.Fuzz(func(t *testing.T, config, crc string) {
		bounded := func(err error) {
			if msg := err.Error(); strings.Contains(msg, "\n") || len(msg) > 2048 {
				t.Fatalf("error is not one bounded line (%d bytes): %.300q", len(msg), msg)
			}
		}
		md := map[string]string{checkpoint.ConfigKey: config, checkpoint.ChecksumKey: crc}
		if _, err := checkpoint.ParseChecksums(md); err != nil {
			bounded(err)
		}
		m, err := checkpoint.ParseMeta(md)
		if err != nil {
			bounded(err)
			return
		}
		if err := m.CheckTensors(found); err != nil {
			bounded(err)
			return
		}
		s := m.Scaffold
		hc, ok := m.Backbone.Config().(*hnet.Config)
		if !ok {
			return // the other kinds' bounds are their families' tests
		}
		if s.GridRows > checkpoint.MaxGridSide || s.GridCols > checkpoint.MaxGridSide || hc.Depth > checkpoint.MaxBlocks {
			t.Fatalf("accepted grid %d×%d, depth %d", s.GridRows, s.GridCols, hc.Depth)
		}
		if c := hc; c.Width%c.Heads != 0 {
			t.Fatalf("accepted %d heads for width %d", c.Heads, c.Width)
		}
		if n := len(m.Shapes()); n > 4*len(found)+64 {
			t.Fatalf("%d expected tensors for a file of %d", n, len(found))
		}
		m.FLOPsPerRho(250)
		if r := m.Sampling; r != nil && (r.Steps < 1 || r.Steps > checkpoint.MaxDiffusionSteps || !(r.DenseBelow >= 0 && r.DenseBelow <= checkpoint.MaxDiffusionSteps) ||
			!(r.CFG >= 0 && r.CFG <= checkpoint.MaxGuidance) || !(r.Shift >= 0 && r.Shift <= checkpoint.MaxGuidance)) {
			t.Fatalf("accepted sampling %+v", *r)
		}
	})
}

// Package dctest builds DC-DiT models and DC checkpoints from the
// dcdit-tiny golden fixtures for tests: the reference weights with the head
// count and settings their config.json records.
package dctest

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/internal/fixtures"
)

// Kind is the fixture kind the models come from.
const Kind = "dcdit-tiny"

// Cases returns the dcdit-tiny fixture cases, failing the test when there
// are none.
func Cases(tb testing.TB) []fixtures.Case {
	tb.Helper()
	root, err := fixtures.Root()
	if err != nil {
		tb.Fatal(err)
	}
	cases, err := fixtures.Discover(root, Kind)
	if err != nil {
		tb.Fatal(err)
	}
	if len(cases) == 0 {
		tb.Fatalf("dctest: no %q fixture cases under %s", Kind, root)
	}
	return cases
}

// Model loads the reference model of a case (weights.safetensors) and the
// ρ values its config lists (tail_dropping_fractions, sorted).
func Model(tb testing.TB, c fixtures.Case) (*dc.Model, []float64) {
	tb.Helper()
	hc, _ := c.Config["hnet"].(map[string]any)
	heads, _ := hc["num_heads"].([]any)
	if len(heads) == 0 {
		tb.Fatalf("%s: config.json lacks hnet.num_heads", c.Name)
	}
	h, _ := heads[len(heads)-1].(float64)
	num := func(m map[string]any, key string) float64 {
		v, ok := m[key].(float64)
		if !ok {
			tb.Fatalf("%s: config.json has no number %q", c.Name, key)
		}
		return v
	}
	m, err := hnet.Load(filepath.Join(c.Dir, "weights.safetensors"), hnet.LoadOptions{
		Heads: int(h),
		Settings: dc.Settings{
			Sigma:           num(hc, "dechunk_kernel_sigma"),
			TargetN:         num(c.Config, "downsample_factor_N"),
			RatioLossWeight: num(c.Config, "ratio_loss_weight"),
			RatioBatchSize:  int(num(c.Config, "ratio_batch_size")),
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	var rhos []float64
	if fr, ok := c.Config["tail_dropping_fractions"].(map[string]any); ok {
		for _, v := range fr {
			if f, ok := v.(float64); ok {
				rhos = append(rhos, f)
			}
		}
	}
	slices.Sort(rhos)
	return m, rhos
}

// Checkpoint saves the first case's model as a DC checkpoint in a fresh
// temporary folder and returns its path.
func Checkpoint(tb testing.TB) string {
	tb.Helper()
	c := Cases(tb)[0]
	m, rhos := Model(tb, c)
	path := filepath.Join(tb.TempDir(), "dcdit-tiny.safetensors")
	info := checkpoint.Info{TrainedRhos: rhos, Base: &checkpoint.Base{Path: filepath.Join(c.Dir, "weights.safetensors"), Architecture: "dcdit", Layout: "original"}}
	if err := checkpoint.Save(path, m, info); err != nil {
		tb.Fatal(err)
	}
	return path
}

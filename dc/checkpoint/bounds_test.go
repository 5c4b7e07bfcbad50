package checkpoint_test

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Sizes in the metadata are bounded before they size anything: each
// malformed case is one short line naming the file, the key, what was
// found and what is allowed.
func TestLoadBoundsMetadata(t *testing.T) {
	good := dctest.Checkpoint(t)
	scaffold := func(key string, v any) func(map[string]any) {
		return func(c map[string]any) { c["scaffold"].(map[string]any)[key] = v }
	}
	backbone := func(key string, v any) func(map[string]any) {
		return func(c map[string]any) { c["backbone"].(map[string]any)["config"].(map[string]any)[key] = v }
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		want []string
	}{
		{"grid rows", scaffold("grid_rows", 100000), []string{"grid_rows = 100000", "at most 1024"}},
		{"grid cols", scaffold("grid_cols", 1<<40), []string{"grid_cols = 1099511627776"}},
		{"grid times width", func(c map[string]any) {
			sc := c["scaffold"].(map[string]any)
			sc["grid_rows"], sc["grid_cols"], sc["router_dim"] = 1024, 1024, 2048
		}, []string{"grid 1024×1024 at width 2048", "at most 1073741824"}},
		{"encoder blocks", scaffold("encoder_blocks", 1000000000), []string{"encoder_blocks = 1000000000"}},
		{"width", scaffold("enc_dec_dim", 1<<30), []string{"enc_dec_dim = 1073741824"}},
		{"depth huge", backbone("depth", 100000), []string{"depth = 100000", "at most 1024"}},
		{"depth beyond the tensors", backbone("depth", 1000), []string{"depth = 1000", "the file holds"}},
		{"decoder blocks beyond the tensors", scaffold("decoder_blocks", 9), []string{"decoder_blocks = 9", "the file holds"}},
		{"heads do not divide", backbone("heads", 3), []string{"3 heads", "dividing the width"}},
		{"long unknown field", scaffold(strings.Repeat("x", 100000), 1), []string{"unknown field"}},
		{"long kind", func(c map[string]any) { c["backbone"].(map[string]any)["kind"] = strings.Repeat("k", 100000) }, []string{"unknown backbone kind"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := checkpoint.Load(rewrite(t, good, editConfig(t, c.edit)))
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", c.want)
			}
			msg := err.Error()
			if len(msg) > 1024 || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one short line (%d bytes): %.300q", len(msg), msg)
			}
			for _, w := range append(c.want, "edited.safetensors") {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// Error messages that list tensors list a few and count the rest.
func TestLoadCapsListedNames(t *testing.T) {
	good := dctest.Checkpoint(t)
	path := rewrite(t, good, func(ts map[string]safetensors.WriteTensor, md map[string]string) {
		for name := range ts {
			if strings.HasPrefix(name, "hnet.routing_module.") || strings.HasPrefix(name, "final_layer.") {
				delete(ts, name)
			}
		}
		delete(md, checkpoint.ChecksumKey)
	})
	_, _, err := checkpoint.Load(path)
	if err == nil {
		t.Fatal("no error for a checkpoint missing 14 tensors")
	}
	if !strings.Contains(err.Error(), "… and 4 more") {
		t.Errorf("error %q does not count the names it leaves out", err)
	}
}

// A checkpoint without checksums loads, with a warning that says so;
// one with them has no warning.
func TestMissingChecksumWarns(t *testing.T) {
	good := dctest.Checkpoint(t)
	plain := rewrite(t, good, func(_ map[string]safetensors.WriteTensor, md map[string]string) { delete(md, checkpoint.ChecksumKey) })
	for _, c := range []struct {
		path string
		warn bool
	}{{good, false}, {plain, true}} {
		_, meta, err := checkpoint.Load(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(meta.Warnings) > 0 && strings.Contains(meta.Warnings[0], checkpoint.ChecksumKey); got != c.warn {
			t.Errorf("%s: warnings %q, want a checksum warning: %v", c.path, meta.Warnings, c.warn)
		}
	}
}

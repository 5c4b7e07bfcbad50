package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/convert"
)

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(testdata, "checkpoints", "dit-original.safetensors")
	cases := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		creates    string
		notCreated string
	}{
		{"dry run", []string{"convert", src, filepath.Join(dir, "dry"), "--layout", "diffusers", "--dry-run"}, 0,
			[]string{"plan: dit original → diffusers", "NAME", "TRANSFORM", "transformer_blocks.1.attn1.to_v.weight", "blocks.1.attn.qkv.weight[64:96]", "split", "replicate (block 1)", "drop pos_embed"}, nil, "", "dry"},
		{"folder", []string{"convert", src, filepath.Join(dir, "d"), "--layout", "diffusers", "--dtype", "bf16", "--shard-size", "50kB"}, 0,
			nil, []string{"wrote", "dit original → diffusers"}, "d/diffusion_pytorch_model.safetensors.index.json", ""},
		{"back quietly", []string{"convert", filepath.Join(dir, "d"), filepath.Join(dir, "o.safetensors"), "--layout", "original", "-q"}, 0,
			nil, nil, "o.safetensors", ""},
		{"no layout", []string{"convert", src, filepath.Join(dir, "x")}, 2, nil, []string{"--layout is required"}, "", "x"},
		{"bad dtype", []string{"convert", src, filepath.Join(dir, "x"), "--layout", "diffusers", "--dtype", "f8"}, 2, nil, []string{"--dtype \"f8\""}, "", "x"},
		{"shards of a file", []string{"convert", src, filepath.Join(dir, "x.safetensors"), "--layout", "diffusers", "--shard-size", "1MB"}, 2, nil, []string{"give a folder name"}, "", "x.safetensors"},
		{"dc layout", []string{"convert", src, filepath.Join(dir, "x"), "--layout", "official"}, 1, nil, []string{"not yet supported"}, "", "x"},
		{"dit to comfy", []string{"convert", src, filepath.Join(dir, "x"), "--layout", "comfy"}, 1, nil, []string{"DiT has no ComfyUI layout"}, "", "x"},
		{"zimage f16", []string{"convert", filepath.Join(testdata, "checkpoints", "zimage-comfy.safetensors"), filepath.Join(dir, "x"), "--layout", "diffusers", "--dtype", "f16"}, 0, nil, nil, "x/config.json", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errOut)
			}
			for _, s := range c.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range c.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if c.creates != "" {
				if _, err := os.Stat(filepath.Join(dir, c.creates)); err != nil {
					t.Error(err)
				}
			}
			if c.notCreated != "" {
				if _, err := os.Stat(filepath.Join(dir, c.notCreated)); err == nil {
					t.Errorf("%s was created", c.notCreated)
				}
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"5GB", 5e9, true}, {"500MB", 5e8, true}, {"2GiB", 2 << 30, true}, {"10 kb", 1e4, true},
		{"123", 123, true}, {"0", 0, true}, {"1.5GB", 15e8, true},
		{"", 0, false}, {"-1GB", 0, false}, {"5XB", 0, false}, {"1e30GB", 0, false},
	} {
		got, err := convert.ParseSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

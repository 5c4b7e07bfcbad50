package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/internal/cli/convert"
	"github.com/dcdit/dcdit/internal/dctest"
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
		{"a DiT to the official DC-DiT", []string{"convert", src, filepath.Join(dir, "x.pt"), "--layout", "official"}, 1, nil, []string{"dit-original.safetensors"}, "", "x.pt"},
		{"official with a dtype", []string{"convert", src, filepath.Join(dir, "x.pt"), "--layout", "official", "--dtype", "bf16"}, 2, nil, []string{"--dtype: DC-DiT conversions"}, "", "x.pt"},
		{"force without export", []string{"convert", src, filepath.Join(dir, "x"), "--layout", "diffusers", "--force"}, 2, nil, []string{"--force goes with --layout official"}, "", "x"},
		{"official config without import", []string{"convert", src, filepath.Join(dir, "x"), "--layout", "diffusers", "--official-config", "c.yaml"}, 2, nil, []string{"--official-config goes with --layout dcdit"}, "", "x"},
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

// A DC checkpoint goes to the official DC-DiT's files and back, and the
// imported model samples at a budget; a bare official state dict without
// a config is refused, naming the flag.
func TestConvertOfficial(t *testing.T) {
	dir := t.TempDir()
	src := dctest.Checkpoint(t)
	_, meta, err := checkpoint.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	heads := meta.Backbone.Config().(*hnet.Config).Heads
	pt, back := filepath.Join(dir, "dc-dit.pt"), filepath.Join(dir, "back.safetensors")
	steps := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"export", []string{"convert", src, pt, "--layout", "official"}, 0, "and its config " + filepath.Join(dir, "dc-dit.yaml")},
		{"again", []string{"convert", src, pt, "--layout", "official"}, 1, "exists"},
		{"import without a config", []string{"convert", pt, back, "--layout", "dcdit"}, 1, "--official-config"},
		{"import", []string{"convert", pt, back, "--layout", "dcdit", "--official-config", filepath.Join(dir, "dc-dit.yaml")}, 0, "wrote " + back},
		{"inspect", []string{"inspect", back}, 0, ""},
		{"sample at ρ 0.5", []string{"sample", back, "--rho", "0.5", "--steps", "2", "--out", filepath.Join(dir, "s.safetensors"), "-q"}, 0, ""},
		{"import with a head count only", []string{"convert", pt, filepath.Join(dir, "heads.safetensors"), "--layout", "dcdit", "--num-heads", strconv.Itoa(heads)}, 0, "wrote"},
		{"inspect that", []string{"inspect", filepath.Join(dir, "heads.safetensors")}, 0, ""},
		{"heads on export", []string{"convert", src, filepath.Join(dir, "y.pt"), "--layout", "official", "--num-heads", "2"}, 2, "--num-heads"},
	}
	for _, s := range steps {
		code, _, errOut := run(t, s.args...)
		if code != s.code || !strings.Contains(errOut, s.stderr) {
			t.Fatalf("%s: exit %d (want %d), stderr %q (want it to say %q)", s.name, code, s.code, errOut, s.stderr)
		}
	}
}

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/dctest"
)

// floatList parses a comma-separated metadata list.
func floatList(t *testing.T, s string) []float64 {
	t.Helper()
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatalf("metadata list %q: %v", s, err)
		}
		out = append(out, v)
	}
	return out
}

func avg(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// dcRun is one sampling run of a DC checkpoint and what it reported.
type dcRun struct {
	latents []byte
	md      map[string]string
	kept    []float64 // mean kept tokens per image, per step (conditional)
	flops   float64   // per image
	stderr  string
}

func sampleDC(t *testing.T, ckpt string, args ...string) dcRun {
	t.Helper()
	out, code, stdout, stderr := sampleRun(t, append([]string{ckpt}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "wrote "+out+": latents ") {
		t.Errorf("stdout = %q", stdout)
	}
	shape, raw, md := readLatents(t, out)
	if md["dcdit.architecture"] != "dcdit" || md["dcdit.tokens"] == "" {
		t.Errorf("metadata %v", md)
	}
	L, _ := strconv.Atoi(md["dcdit.tokens"])
	if len(shape) != 4 || int(shape[2]*shape[3]) != L {
		t.Errorf("latents %v for %d tokens", shape, L)
	}
	r := dcRun{latents: raw, md: md, kept: floatList(t, md["dcdit.kept_per_step"]), stderr: stderr}
	steps, _ := strconv.Atoi(md["dcdit.steps"])
	if len(r.kept) != steps {
		t.Errorf("%d kept counts for %d steps", len(r.kept), steps)
	}
	for _, k := range r.kept {
		if !(k >= 1 && k <= float64(L)) {
			t.Errorf("kept %v of %d tokens", k, L)
		}
	}
	var err error
	if r.flops, err = strconv.ParseFloat(md["dcdit.flops_per_image"], 64); err != nil || !(r.flops > 0) {
		t.Errorf("dcdit.flops_per_image = %q", md["dcdit.flops_per_image"])
	}
	return r
}

// Sampling a DC checkpoint: ρ changes the latents and lowers the kept
// tokens and FLOPs; the seed decides everything; Lite-CFG drops more in the
// unconditional branch.
func TestSampleDC(t *testing.T) {
	ckpt := dctest.Checkpoint(t)
	base := []string{"--steps", "4", "--class", "1,2", "--num", "2", "--seed", "5"}
	at := func(extra ...string) dcRun { return sampleDC(t, ckpt, append(slices.Clone(base), extra...)...) }

	r0, r6 := at(), at("--rho", "0.6")
	if r0.md["dcdit.rho"] != "0" || r6.md["dcdit.rho"] != "0.6" || r6.md["dcdit.rho_uncond"] != "0.6" {
		t.Errorf("metadata rho %q / %q, rho_uncond %q", r0.md["dcdit.rho"], r6.md["dcdit.rho"], r6.md["dcdit.rho_uncond"])
	}
	if bytes.Equal(r0.latents, r6.latents) {
		t.Error("ρ 0 and ρ 0.6 gave the same latents")
	}
	// The first step starts from the same noise, so its kept counts compare
	// directly; over the run the means do.
	if !(r6.kept[0] < r0.kept[0]) || !(avg(r6.kept) < avg(r0.kept)) || !(r6.flops < r0.flops) {
		t.Errorf("ρ 0.6 kept %v (%.4g FLOP), ρ 0 kept %v (%.4g FLOP): want fewer", r6.kept, r6.flops, r0.kept, r0.flops)
	}
	for _, r := range []dcRun{r0, r6} {
		if !strings.Contains(r.stderr, "dc: ρ ") || !strings.Contains(r.stderr, "GFLOP per image") || !strings.Contains(r.stderr, "tokens per image") {
			t.Errorf("stderr lacks the summary line: %q", r.stderr)
		}
	}

	// Determinism: the same seed gives the same bytes and counts; another
	// seed does not.
	again := at()
	if !bytes.Equal(again.latents, r0.latents) || !slices.Equal(again.kept, r0.kept) || again.flops != r0.flops {
		t.Error("two runs with the same seed differ")
	}
	if other := at("--seed", "6"); bytes.Equal(other.latents, r0.latents) {
		t.Error("another seed gave the same latents")
	}

	// Lite-CFG: one batched forward, the unconditional branch at its own ρ.
	lite := at("--rho", "0.3", "--rho-uncond", "0.9")
	plain := at("--rho", "0.3")
	if lite.md["dcdit.rho_uncond"] != "0.9" || !strings.Contains(lite.stderr, "Lite-CFG") {
		t.Errorf("Lite-CFG run: rho_uncond %q, stderr %q", lite.md["dcdit.rho_uncond"], lite.stderr)
	}
	uncond := floatList(t, lite.md["dcdit.kept_uncond_per_step"])
	if !(uncond[0] < lite.kept[0]) || !(lite.flops < plain.flops) || bytes.Equal(lite.latents, plain.latents) {
		t.Errorf("Lite-CFG kept %v cond / %v uncond, %.4g FLOP vs %.4g at one ρ", lite.kept, uncond, lite.flops, plain.flops)
	}

	// --lookback keeps as many cells at the first two steps (the same
	// latents) but other ones, so other latents; metadata says so.
	look := at("--rho", "0.6", "--lookback")
	if bytes.Equal(look.latents, r6.latents) || !slices.Equal(look.kept[:2], r6.kept[:2]) || look.md["dcdit.lookback"] != "true" {
		t.Errorf("lookback: kept %v (without: %v), the same latents %v, metadata %q", look.kept, r6.kept, bytes.Equal(look.latents, r6.latents), look.md["dcdit.lookback"])
	}
	// --lookback-spacing covers the estimate instead: other cells, so
	// other latents.
	cover := at("--rho", "0.6", "--lookback", "--lookback-spacing", "4")
	if bytes.Equal(cover.latents, look.latents) || !slices.Equal(cover.kept[:2], look.kept[:2]) || cover.md["dcdit.lookback_spacing"] != "4" {
		t.Errorf("lookback spacing: kept %v (change ranking: %v), the same latents %v, metadata %q", cover.kept, look.kept, bytes.Equal(cover.latents, look.latents), cover.md["dcdit.lookback_spacing"])
	}

	// Without guidance there is one branch and half the work.
	solo := at("--cfg", "1")
	if _, ok := solo.md["dcdit.rho_uncond"]; ok || solo.md["dcdit.kept_uncond_per_step"] != "" || solo.md["dcdit.cfg_channels"] != "0" {
		t.Errorf("unguided run metadata %v", solo.md)
	}
	if !(solo.flops < r0.flops) {
		t.Errorf("unguided %.4g FLOP per image, guided %.4g", solo.flops, r0.flops)
	}

	// --quiet prints nothing.
	_, code, stdout, stderr := sampleRun(t, ckpt, "--steps", "1", "-q")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("quiet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// An official DC-DiT state dict samples as the DC checkpoint of its
// weights does, bit for bit: with --num-heads (the de-chunk σ assumed,
// and said), and, written by 'dcdit convert --layout official' with its
// YAML config beside it, with no flag at all. A head count beside the
// config that contradicts it is refused.
func TestSampleOfficial(t *testing.T) {
	ckpt := dctest.Checkpoint(t)
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	pt := filepath.Join(t.TempDir(), "dc-dit.pt")
	if code, _, stderr := run(t, "convert", ckpt, pt, "--layout", "official", "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	args := []string{"--steps", "3", "--class", "1,2", "--seed", "5", "--rho", "0.3"}
	want := sampleDC(t, ckpt, args...)
	for _, c := range []struct {
		name, path string
		extra      []string
		warns      bool
	}{
		{"state dict and --num-heads", ref, []string{"--num-heads", dcTinyCase(t).heads}, true},
		{"state dict and its config", pt, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sampleDC(t, c.path, append(slices.Clone(args), c.extra...)...)
			if !bytes.Equal(got.latents, want.latents) || !slices.Equal(got.kept, want.kept) || got.flops != want.flops {
				t.Errorf("latents, kept %v or FLOPs %v differ from the DC checkpoint's (kept %v, FLOPs %v)", got.kept, got.flops, want.kept, want.flops)
			}
			if warned := strings.Contains(got.stderr, "de-chunk σ"); warned != c.warns {
				t.Errorf("stderr %q: a warning of the assumed de-chunk σ: %v, want %v", got.stderr, warned, c.warns)
			}
		})
	}
	_, code, _, stderr := sampleRun(t, pt, "--num-heads", "3", "--steps", "1")
	if code != 1 || !strings.Contains(stderr, "dc-dit.yaml states") || !strings.Contains(stderr, "3 were given") {
		t.Errorf("contradicting --num-heads: exit %d, stderr %q", code, stderr)
	}
}

// Wrong use with DC checkpoints, and DC flags with other checkpoints, end
// with one line naming the problem: exit 2 for usage, 1 for bad input.
func TestSampleDCErrors(t *testing.T) {
	ckpt := dctest.Checkpoint(t)
	raw, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-5] ^= 0xff
	corrupt := filepath.Join(t.TempDir(), "corrupt.safetensors")
	if err := os.WriteFile(corrupt, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"rho on a DiT", []string{ditTiny(t), "--num-heads", "4", "--rho", "0.3"}, 2, []string{"--rho applies to DC checkpoints", "dit checkpoint"}},
		{"rho 0 on a DiT", []string{ditTiny(t), "--num-heads", "4", "--rho", "0"}, 2, []string{"--rho applies to DC checkpoints"}},
		{"rho-uncond on a DiT", []string{ditTiny(t), "--num-heads", "4", "--rho-uncond", "0.5"}, 2, []string{"--rho-uncond applies to DC checkpoints"}},
		{"drop on a DiT", []string{ditTiny(t), "--num-heads", "4", "--drop", "spread"}, 2, []string{"--drop applies to DC checkpoints"}},
		{"drop unknown", []string{ckpt, "--drop", "sideways"}, 2, []string{`--drop "sideways"`, "lowest|spread"}},
		{"lookback on a DiT", []string{ditTiny(t), "--num-heads", "4", "--lookback"}, 2, []string{"--lookback applies to DC checkpoints"}},
		{"lookback with teacache", []string{ckpt, "--lookback", "--teacache", "0.5"}, 2, []string{"--lookback and --teacache 0.5", "do not combine"}},
		{"lookback spacing without lookback", []string{ckpt, "--lookback-spacing", "4"}, 2, []string{"--lookback-spacing 4", "add --lookback"}},
		{"negative lookback spacing", []string{ckpt, "--lookback", "--lookback-spacing", "-1"}, 2, []string{"--lookback-spacing -1", "finite spacing ≥ 0"}},
		{"rho 1", []string{ckpt, "--rho", "1"}, 2, []string{"--rho 1", "0 ≤ ρ < 1"}},
		{"rho negative", []string{ckpt, "--rho", "-0.5"}, 2, []string{"--rho -0.5"}},
		{"rho not a number", []string{ckpt, "--rho", "half"}, 2, []string{"--rho", "half"}},
		{"rho-uncond 1", []string{ckpt, "--rho-uncond", "1"}, 2, []string{"--rho-uncond 1"}},
		{"rho-uncond without guidance", []string{ckpt, "--cfg", "1", "--rho-uncond", "0.5"}, 2, []string{"--rho-uncond needs classifier-free guidance"}},
		{"class out of range", []string{ckpt, "--class", "10"}, 1, []string{"--class 10", "10 classes"}},
		{"corrupted", []string{corrupt}, 1, []string{"corrupt.safetensors", "CRC-32C"}},
		{"reference state_dict without heads", []string{ref}, 1, []string{"weights.safetensors", "pass --num-heads", "weights.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "latents.safetensors")
			code, stdout, stderr := run(t, append([]string{"sample", "--out", out, "--steps", "1"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if stdout != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "dcdit: ") {
				t.Errorf("stdout %q, stderr %q: want one 'dcdit: ' line on stderr", stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written despite the error", out)
			}
		})
	}
}

func TestSampleHelpDC(t *testing.T) {
	code, out, _ := run(t, "sample", "--help")
	for _, want := range []string{"DC checkpoint", "--rho float", "--rho-uncond float", "Lite-CFG", "dcdit.kept_per_step", "dcdit.flops_per_image"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

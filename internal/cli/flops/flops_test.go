package flops

import (
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dc/hnet/official"
	_ "github.com/dcdit/dcdit/families"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/zimagetest"
)

const testdata = "../../../testdata"

// parse runs the command's flag handling with runF capturing the options.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmd(ios, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.Err)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return got, err
}

func TestFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want Options
	}{
		{"defaults", []string{"DiT-XL/2"}, Options{Model: "DiT-XL/2", Steps: 250}},
		{"rho list and repeated", []string{"DC-DiT-S", "--rho", "0,0.3", "--rho", "0.6", "--cfg", "--steps", "249", "--resolution", "512", "--json"},
			Options{Model: "DC-DiT-S", Steps: 249, Resolution: 512, CFG: true, Rho: []float64{0, 0.3, 0.6}, JSON: true}},
		{"lite-cfg", []string{"m.safetensors", "--rho-uncond", "0", "--kept-ratio", "0.2", "--num-heads", "6"},
			Options{Model: "m.safetensors", Steps: 250, RhoUncondGiven: true, KeptRatio: 0.2, NumHeads: 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if !reflect.DeepEqual(*got, c.want) {
				t.Errorf("options %+v, want %+v", *got, c.want)
			}
		})
	}
}

func TestFlagUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "takes 1 argument(s)"},
		{[]string{"a", "b"}, "takes 1 argument(s)"},
		{[]string{"DiT-S/2", "--steps", "0"}, "--steps 0: want at least 1"},
		{[]string{"DiT-S/2", "--resolution", "100"}, "--resolution 100: want a positive multiple of 8"},
		{[]string{"DiT-S/2", "--resolution", "-8"}, "--resolution -8"},
		{[]string{"DC-DiT-S", "--kept-ratio", "1.5"}, "--kept-ratio 1.5: want 0 < ratio ≤ 1"},
		{[]string{"DC-DiT-S", "--kept-ratio", "-0.1"}, "--kept-ratio -0.1"},
		{[]string{"DC-DiT-S", "--rho", "0,1"}, "--rho 1: want 0 ≤ ρ < 1"},
		{[]string{"DC-DiT-S", "--rho", "NaN"}, "--rho NaN"},
		{[]string{"DC-DiT-S", "--rho-uncond", "-0.5"}, "--rho-uncond -0.5: want 0 ≤ ρ < 1"},
		{[]string{"DiT-S/2", "--num-heads", "-1"}, "--num-heads -1"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parse(t, c.args...)
			var usage *cmdutil.UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %v, want a usage error containing %q", err, c.msg)
			}
		})
	}
}

// runJSON runs the command with --json and decodes the result.
func runJSON(t *testing.T, args ...string) (*Result, error) {
	t.Helper()
	ios, _, out, _ := iostreams.Test()
	cmd := NewCmd(ios, nil)
	cmd.SetArgs(append(args, "--json"))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	var raw map[string]any
	json.Unmarshal(out.Bytes(), &raw)
	if _, ok := raw["tflops_per_image"].(float64); !ok {
		t.Fatalf("JSON lacks tflops_per_image:\n%s", out)
	}
	return &res, nil
}

// The fixed-patch baselines at 256 px and 250 steps land within 1% of the
// DC-DiT paper's TFLOPs per image; excluding the first step, as the
// reference's printout does, they match its printed figures (DiT-XL/2 to
// 0.2%, the residue the help explains).
func TestBaselinesMatchPaper(t *testing.T) {
	cases := []struct {
		preset string
		paper  float64
		tol249 float64
	}{
		{"DiT-S/2", 3.02, 0.005}, {"DiT-B/2", 11.46, 0.005}, {"DiT-L/2", 40.21, 0.005}, {"DiT-XL/2", 59.00, 0.1},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			res, err := runJSON(t, c.preset)
			if err != nil {
				t.Fatal(err)
			}
			if res.Architecture != "dit" || res.Resolution != 256 || res.Tokens != 256 || res.Steps != 250 || res.CFG {
				t.Errorf("result %+v", res)
			}
			if rel := math.Abs(res.TFLOPsPerImage-c.paper) / c.paper; !(rel <= 0.01) {
				t.Errorf("%.3f TFLOPs per image, paper %.2f (%.2f%% off)", res.TFLOPsPerImage, c.paper, 100*rel)
			}
			res249, err := runJSON(t, c.preset, "--steps", "249")
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(res249.TFLOPsPerImage - c.paper); !(d <= c.tol249) {
				t.Errorf("249 steps: %.3f TFLOPs, paper %.2f", res249.TFLOPsPerImage, c.paper)
			}
			guided, err := runJSON(t, c.preset, "--cfg")
			if err != nil {
				t.Fatal(err)
			}
			if !guided.CFG || !fixtures.Within(math.Abs(guided.TFLOPsPerImage-2*res.TFLOPsPerImage), 1e-9*res.TFLOPsPerImage) {
				t.Errorf("--cfg: %v TFLOPs, want twice %v", guided.TFLOPsPerImage, res.TFLOPsPerImage)
			}
			b := res.Budgets[0]
			if sum := sumParts(b.Parts); !fixtures.Within(math.Abs(sum-b.ForwardGFLOPs), 1e-9*sum) || b.Rho != nil {
				t.Errorf("parts sum to %v, forward %v; rho %v", sum, b.ForwardGFLOPs, b.Rho)
			}
		})
	}
}

func sumParts(ps []Part) float64 {
	var s float64
	for _, p := range ps {
		s += p.GFLOPs
	}
	return s
}

// A DC preset at several ρ: kept counts follow the reference's truncation
// (256 natural boundaries of 1024; floor(256·0.3) = 76 and floor(256·0.6) =
// 153 dropped), FLOPs fall with ρ, the main network's part is the hnet
// count over the kept tokens, and the per-image total is steps × forward.
func TestDCPreset(t *testing.T) {
	res, err := runJSON(t, "dc-dit-s", "--rho", "0,0.3", "--rho", "0.6")
	if err != nil {
		t.Fatal(err)
	}
	if res.Preset != "DC-DiT-S" || res.Architecture != "dcdit" || res.Tokens != 1024 || res.KeptRatio != 0.25 || len(res.Budgets) != 3 {
		t.Fatalf("result %+v", res)
	}
	p, _ := dc.LookupPreset("DC-DiT-S")
	net := hnet.PresetConfig(p)
	want := []int{256, 180, 103}
	prev := math.Inf(1)
	for i, b := range res.Budgets {
		if b.KeptTokens != want[i] || b.NaturalTokens != 256 {
			t.Errorf("ρ %v: %d of %d kept, want %d of 256", *b.Rho, b.KeptTokens, b.NaturalTokens, want[i])
		}
		if !(b.ForwardGFLOPs < prev) {
			t.Errorf("ρ %v: %v GFLOPs, not below the previous %v", *b.Rho, b.ForwardGFLOPs, prev)
		}
		prev = b.ForwardGFLOPs
		if sum := sumParts(b.Parts); !fixtures.Within(math.Abs(sum-b.ForwardGFLOPs), 1e-9*sum) {
			t.Errorf("ρ %v: parts sum to %v, forward %v", *b.Rho, sum, b.ForwardGFLOPs)
		}
		main := (&hnet.Network{Config: net}).FLOPs([]int{want[i]}) / 1e9
		for _, part := range b.Parts {
			if part.Name == "main network" && !fixtures.Within(math.Abs(part.GFLOPs-main), 1e-9*main) {
				t.Errorf("ρ %v: main network %v GFLOPs, hnet counts %v", *b.Rho, part.GFLOPs, main)
			}
		}
		if !fixtures.Within(math.Abs(b.TFLOPsPerImage-250*b.ForwardGFLOPs/1e3), 1e-9*b.TFLOPsPerImage) {
			t.Errorf("ρ %v: %v TFLOPs per image for %v GFLOPs per forward", *b.Rho, b.TFLOPsPerImage, b.ForwardGFLOPs)
		}
	}
	// The reference README's DC-DiT-S: 124 / 93 / 63 GFLOP per forward of
	// a batch of 8 with the router keeping about a quarter of the tokens.
	for i, ref := range []float64{124, 93, 63} {
		if got := 8 * res.Budgets[i].ForwardGFLOPs; !fixtures.Within(math.Abs(got-ref), 0.02*ref) {
			t.Errorf("ρ %v: %.1f GFLOP per batch of 8, the reference README says %v", *res.Budgets[i].Rho, got, ref)
		}
	}
	if res.TFLOPsPerImage != res.Budgets[0].TFLOPsPerImage || res.ForwardGFLOPs != res.Budgets[0].ForwardGFLOPs {
		t.Errorf("top-level figures %v / %v, want the first budget's", res.TFLOPsPerImage, res.ForwardGFLOPs)
	}
}

// Guidance: --cfg doubles a step; Lite-CFG adds the unconditional forward
// at its own ρ; --kept-ratio and --resolution move the kept counts.
func TestDCGuidanceAndAssumptions(t *testing.T) {
	plain, err := runJSON(t, "DC-DiT-B", "--rho", "0.2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := runJSON(t, "DC-DiT-B", "--rho", "0.2", "--cfg")
	if err != nil {
		t.Fatal(err)
	}
	lite, err := runJSON(t, "DC-DiT-B", "--rho", "0.2", "--rho-uncond", "0.9")
	if err != nil {
		t.Fatal(err)
	}
	uncond, err := runJSON(t, "DC-DiT-B", "--rho", "0.9")
	if err != nil {
		t.Fatal(err)
	}
	f := plain.Budgets[0].ForwardGFLOPs
	if got := cfg.Budgets[0].StepGFLOPs; !fixtures.Within(math.Abs(got-2*f), 1e-9*f) {
		t.Errorf("--cfg step %v GFLOPs, want 2 × %v", got, f)
	}
	lb := lite.Budgets[0]
	if !lite.CFG || lb.KeptTokensUncond != 26 || *lb.RhoUncond != 0.9 || !fixtures.Within(math.Abs(lb.StepGFLOPs-f-uncond.ForwardGFLOPs), 1e-9*f) {
		t.Errorf("Lite-CFG budget %+v; want step = %v + %v with 26 unconditional tokens", lb, f, uncond.ForwardGFLOPs)
	}
	if lb.ForwardGFLOPs != f {
		t.Errorf("Lite-CFG forward %v, want the conditional branch's %v", lb.ForwardGFLOPs, f)
	}
	for _, c := range []struct {
		args        []string
		tokens, nat int
	}{
		{[]string{"DC-DiT-S", "--kept-ratio", "0.125"}, 1024, 128},
		{[]string{"DC-DiT-XL", "--resolution", "512"}, 4096, 1024},
	} {
		res, err := runJSON(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tokens != c.tokens || res.Budgets[0].NaturalTokens != c.nat || res.Budgets[0].KeptTokens != c.nat {
			t.Errorf("%v: %d tokens, %d natural, %d kept; want %d, %d", c.args, res.Tokens, res.Budgets[0].NaturalTokens, res.Budgets[0].KeptTokens, c.tokens, c.nat)
		}
	}
}

// Checkpoints from their headers: a DiT file, an official DC-DiT state
// dict (bare, and exported with its YAML config beside it) and a dcdit DC
// checkpoint, which agree with each other and with the loaded model's own
// count.
func TestCheckpoints(t *testing.T) {
	d, err := runJSON(t, filepath.Join(testdata, "checkpoints", "dit-original.safetensors"), "--num-heads", "2")
	if err != nil {
		t.Fatal(err)
	}
	if d.Architecture != "dit" || d.Tokens != 16 || d.Resolution != 64 || !(d.TFLOPsPerImage > 0) {
		t.Errorf("DiT checkpoint: %+v", d)
	}

	c := dctest.Cases(t)[0]
	model, _ := dctest.Model(t, c)
	net := model.Backbone.Spec().Settings()
	heads := net.(*hnet.Config).Heads
	ref, err := runJSON(t, filepath.Join(c.Dir, "weights.safetensors"), "--num-heads", strconv.Itoa(heads), "--rho", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	dcPath := dctest.Checkpoint(t)
	ck, err := runJSON(t, dcPath, "--rho", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	pt := filepath.Join(t.TempDir(), "dc-dit.pt")
	if _, _, err := official.ExportFile(dcPath, pt, false); err != nil {
		t.Fatal(err)
	}
	pair, err := runJSON(t, pt, "--rho", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	L := model.Config.Tokens()
	natural := int(float64(L) / model.Config.TargetN)
	kept, _ := dc.KeptAfterDrop(natural, 0.3)
	want := model.ForwardFLOPs([]int{kept}).Total() / 1e9
	for name, r := range map[string]*Result{"reference state dict": ref, "official files": pair, "DC checkpoint": ck} {
		if r.Architecture != "dcdit" || r.Tokens != L || r.Budgets[0].KeptTokens != kept {
			t.Errorf("%s: %+v", name, r)
		}
		if got := r.Budgets[0].ForwardGFLOPs; !fixtures.Within(math.Abs(got-want), 1e-9*want) {
			t.Errorf("%s: %v GFLOPs per forward, the loaded model counts %v", name, got, want)
		}
	}
	for name, r := range map[string]*Result{"official files": pair, "DC checkpoint": ck} {
		if len(r.Warnings) != 0 {
			t.Errorf("%s: warnings %v, want none: they store everything", name, r.Warnings)
		}
	}
	if len(ref.Warnings) != 1 || !strings.Contains(ref.Warnings[0], "target N") {
		t.Errorf("reference state dict warnings %v, want one of the assumed target N", ref.Warnings)
	}

	// --num-heads on a DC checkpoint prices a variant with that head count.
	variant, err := runJSON(t, dcPath, "--rho", "0.3", "--num-heads", strconv.Itoa(2*heads))
	if err != nil {
		t.Fatal(err)
	}
	main := variant.Config.(map[string]any)["main_network"].(map[string]any)
	if main["heads"] != float64(2*heads) || !(variant.ForwardGFLOPs > ck.ForwardGFLOPs) {
		t.Errorf("--num-heads %d: main network %v, %v GFLOPs (stored heads: %v)", 2*heads, main, variant.ForwardGFLOPs, ck.ForwardGFLOPs)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		args  []string
		msg   string
		usage bool
	}{
		{[]string{"DiT-S/2", "--rho", "0.3"}, "DiT-S/2 is a fixed-patch DiT: --rho", true},
		{[]string{"DiT-S/2", "--kept-ratio", "0.3"}, "apply to DC models only", true},
		{[]string{"DiT-S/8", "--resolution", "96"}, "the 12×12 latent does not divide into 8×8 patches", true},
		{[]string{"DiT-M/2"}, "DiT-M/2: no such file, and not a preset (the presets are DiT-XL/2", true},
		{[]string{filepath.Join(testdata, "bad", "short.safetensors")}, "short.safetensors", false},
		{[]string{"Z-Image-Turbo", "--rho", "0.3"}, "Z-Image-Turbo is a Z-Image transformer: --rho", true},
		{[]string{"Z-Image-Turbo", "--resolution", "1032"}, "the 129×129 latent does not divide into 2×2 patches", true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runJSON(t, c.args...)
			var usage *cmdutil.UsageError
			if err == nil || !strings.Contains(err.Error(), c.msg) || errors.As(err, &usage) != c.usage {
				t.Errorf("err = %v, want one containing %q (usage error: %v)", err, c.msg, c.usage)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestTable(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"DiT-XL/2"}, []string{"DiT-XL/2 (preset)", "depth 28, hidden 1152, 16 heads, patch 2", "256 tokens of 2×2 patches",
			"250 steps, no guidance", "blocks", "attention", "forward", "237.3", "TFLOPs per image, 250 steps", "59.33"}},
		{[]string{"DC-DiT-S", "--rho", "0,0.6", "--rho-uncond", "0.9"}, []string{"DC-DiT-S (preset)", "ρ=0", "ρ=0.6", "kept tokens, unconditional",
			"main network", "dechunk", "Lite-CFG", "step (both branches)", "assumed 256 boundaries of 1024 tokens"}},
	} {
		ios, _, out, errOut := iostreams.Test()
		cmd := NewCmd(ios, nil)
		cmd.SetArgs(c.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: table lacks %q:\n%s", c.args, w, out)
			}
		}
		if errOut.Len() != 0 {
			t.Errorf("%v: stderr %q, want nothing for a preset", c.args, errOut)
		}
	}
}

// TestOtherFamilies counts a DC checkpoint whose backbone is not DC-DiT's
// own main network (a grafted Z-Image) through its family, as the loaded
// model counts itself.
func TestOtherFamilies(t *testing.T) {
	_, model := zimagetest.Grafted(t, 1, 8)
	path := filepath.Join(t.TempDir(), "dc-zimage.safetensors")
	if err := checkpoint.Save(path, model, checkpoint.Info{}); err != nil {
		t.Fatal(err)
	}
	r, err := runJSON(t, path, "--rho", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	L := model.Config.Cells()
	natural, err := dc.AssumedBoundaries(1/model.Config.TargetN, L)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := dc.KeptAfterDrop(natural, 0.5)
	want := model.ForwardFLOPs([]int{kept}).Total() / 1e9
	if r.Architecture != "dcdit" || r.Budgets[0].KeptTokens != kept {
		t.Errorf("%+v, want a dcdit model keeping %d tokens", r, kept)
	}
	if got := r.Budgets[0].ForwardGFLOPs; !(got > 0) || !fixtures.Within(math.Abs(got-want), 1e-9*want) {
		t.Errorf("%v GFLOPs per forward, the model counts %v", got, want)
	}

	// --caption-len prices another caption length than the one the
	// checkpoint records, as the backbone counts it.
	spec, ok := model.Backbone.Spec().(family.Recaptioner)
	if !ok {
		t.Fatalf("the grafted Z-Image's spec %T takes no caption length", model.Backbone.Spec())
	}
	longer := spec.WithCaptionLen(64)
	r, err = runJSON(t, path, "--rho", "0.5", "--caption-len", "64")
	if err != nil {
		t.Fatal(err)
	}
	wantLong := dc.ConfigFLOPs(model.Config, longer, []int{kept}).Total() / 1e9
	if got := r.Budgets[0].ForwardGFLOPs; fixtures.Within(math.Abs(got-want), 1e-9*want) || !fixtures.Within(math.Abs(got-wantLong), 1e-9*wantLong) {
		t.Errorf("--caption-len 64: %v GFLOPs per forward, want %v (the recorded length's: %v)", got, wantLong, want)
	}
}

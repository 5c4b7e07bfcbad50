package sample

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/dctest"
)

// sampleCmd runs `dcdit sample` as the command line does and returns the
// latents file's metadata and what went to stderr.
func sampleCmd(t *testing.T, args ...string) (map[string]string, string, error) {
	t.Helper()
	ios, _, _, stderr := iostreams.Test()
	out := filepath.Join(t.TempDir(), "s.safetensors")
	cmd := NewCmd(ios, nil)
	cmd.SetArgs(append(slices.Clone(args), "--out", out))
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.Err)
	cmd.SilenceUsage = true
	if err := cmd.Execute(); err != nil {
		return nil, stderr.String(), err
	}
	_, md := readLatents(t, out)
	return md, stderr.String(), nil
}

// A DC checkpoint's sampling record gives every setting the command line
// does not; a flag overrides it; without a record the defaults apply; one
// line says which is which, and a ρ the model was not trained for is
// warned of but sampled.
func TestSamplingDefaultsFromCheckpoint(t *testing.T) {
	m, rhos := dctest.Model(t, dctest.Cases(t)[0])
	if len(rhos) == 0 {
		t.Fatal("the fixture case lists no trained ρ")
	}
	dir := t.TempDir()
	// Few steps, and a dense_below that splits them: respaced over 1000,
	// the first step is noisier and the last is cleaner than it.
	rec := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 500, CFG: 2.5, Steps: 3}
	recorded := filepath.Join(dir, "recorded.safetensors")
	if err := checkpoint.Save(recorded, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.safetensors")
	if err := checkpoint.Save(plain, m, checkpoint.Info{TrainedRhos: rhos}); err != nil {
		t.Fatal(err)
	}
	trained := rhos[len(rhos)-1]
	untrained := (trained + 1) / 2
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	cases := []struct {
		name string
		args []string
		// want are the settings used: steps, cfg, dense_below as the
		// metadata writes them.
		steps, cfg, dense string
		line              []string // in the settings line
	}{
		{"from the checkpoint", []string{recorded, "--rho", f(trained)}, strconv.Itoa(rec.Steps), f(rec.CFG), f(rec.DenseBelow),
			[]string{"--rho " + f(trained) + " (flag)", fmt.Sprintf("--steps %d (checkpoint)", rec.Steps), "--cfg " + f(rec.CFG) + " (checkpoint)", "--dense-below " + f(rec.DenseBelow) + " (checkpoint)"}},
		{"flags override", []string{recorded, "--rho", f(trained), "--steps", "2", "--cfg", "1", "--dense-below", "0"}, "2", "1", "0",
			[]string{"--steps 2 (flag)", "--cfg 1 (flag)", "--dense-below 0 (flag)"}},
		{"one flag", []string{recorded, "--cfg", "1.5"}, strconv.Itoa(rec.Steps), "1.5", f(rec.DenseBelow),
			[]string{"--rho 0 (default)", "--cfg 1.5 (flag)", fmt.Sprintf("--steps %d (checkpoint)", rec.Steps)}},
		{"no record", []string{plain, "--steps", "2"}, "2", f(defaultCFG), "0",
			[]string{"--steps 2 (flag)", "--cfg " + f(defaultCFG) + " (default)", "--dense-below 0 (default)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md, stderr, err := sampleCmd(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if md["dcdit.steps"] != c.steps || md["dcdit.cfg"] != c.cfg || md["dcdit.dense_below"] != c.dense {
				t.Errorf("sampled with %s steps, cfg %s, dense below %s; want %s, %s, %s", md["dcdit.steps"], md["dcdit.cfg"], md["dcdit.dense_below"], c.steps, c.cfg, c.dense)
			}
			var line string
			for _, l := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(l, "sampling with ") {
					line = l
				}
			}
			for _, w := range c.line {
				if !strings.Contains(line, w) {
					t.Errorf("settings line %q lacks %q (stderr %q)", line, w, stderr)
				}
			}
			if strings.Contains(stderr, "warning: ρ") {
				t.Errorf("a trained ρ warned: %q", stderr)
			}
		})
	}

	// The dense steps keep every cell, as the record says.
	md, _, err := sampleCmd(t, recorded, "--rho", f(trained))
	if err != nil {
		t.Fatal(err)
	}
	kept := strings.Split(md["dcdit.kept_per_step"], ",")
	if L := md["dcdit.tokens"]; len(kept) != rec.Steps || kept[0] == L || kept[len(kept)-1] != L {
		t.Errorf("kept per step %v of %s tokens: want the last (cleanest) step dense and the first not", kept, L)
	}

	// Coarse steps: the recorded ones drop at least their ρ at the first
	// (noisiest) step of a run with a budget, and --coarse-from 0 turns
	// them off.
	coarseRec := rec
	coarseRec.CoarseFrom, coarseRec.CoarseRho = 900, 0.9
	coarse := filepath.Join(dir, "coarse.safetensors")
	if err := checkpoint.Save(coarse, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &coarseRec}); err != nil {
		t.Fatal(err)
	}
	firstKept := func(args ...string) (float64, map[string]string, string) {
		t.Helper()
		md, stderr, err := sampleCmd(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		k, err := strconv.ParseFloat(strings.Split(md["dcdit.kept_per_step"], ",")[0], 64)
		if err != nil {
			t.Fatal(err)
		}
		return k, md, stderr
	}
	withCoarse, cmd, cstderr := firstKept(coarse, "--rho", "0.05")
	without, omd, _ := firstKept(coarse, "--rho", "0.05", "--coarse-from", "0")
	if !(withCoarse < without) || cmd["dcdit.coarse_from"] != "900" || cmd["dcdit.coarse_rho"] != "0.9" || omd["dcdit.coarse_from"] != "" {
		t.Errorf("first step kept %v with the recorded coarse steps (metadata %q, %q), %v without (metadata %q): want fewer, recorded",
			withCoarse, cmd["dcdit.coarse_from"], cmd["dcdit.coarse_rho"], without, omd["dcdit.coarse_from"])
	}
	if !strings.Contains(cstderr, "--coarse-from 900 (checkpoint)") {
		t.Errorf("stderr %q: want the recorded --coarse-from in the settings line", cstderr)
	}

	// An untrained ρ warns on stderr, and samples at it.
	md, stderr, err := sampleCmd(t, recorded, "--rho", f(untrained))
	if err != nil {
		t.Fatal(err)
	}
	if md["dcdit.rho"] != f(untrained) || !strings.Contains(stderr, "warning: ρ "+f(untrained)+": ") {
		t.Errorf("ρ %s: metadata ρ %s, stderr %q: want it sampled with a warning", f(untrained), md["dcdit.rho"], stderr)
	}
	// --quiet: nothing.
	if _, stderr, err := sampleCmd(t, recorded, "--rho", f(untrained), "-q"); err != nil || stderr != "" {
		t.Errorf("quiet: error %v, stderr %q", err, stderr)
	}
}

// A record the command cannot follow is refused before sampling: another
// process's settings, more steps than the sampler respaces, and
// --rho-uncond against a recorded scale without guidance.
func TestSamplingRecordRefused(t *testing.T) {
	m, rhos := dctest.Model(t, dctest.Cases(t)[0])
	save := func(rec checkpoint.Sampling) string {
		path := filepath.Join(t.TempDir(), "m.safetensors")
		if err := checkpoint.Save(path, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name  string
		rec   checkpoint.Sampling
		args  []string
		want  string
		usage bool
	}{
		{"flow record on a DDPM backbone", checkpoint.Sampling{Process: checkpoint.ProcessFlowMatching, CFG: 4, Steps: 2, Shift: 3}, nil, "process flow_matching", false},
		{"too many steps", checkpoint.Sampling{Process: checkpoint.ProcessDDPM, CFG: 4, Steps: trainSteps + 1}, nil, "records 1001 sampling steps", false},
		{"rho-uncond unguided", checkpoint.Sampling{Process: checkpoint.ProcessDDPM, CFG: 1, Steps: 2}, []string{"--rho-uncond", "0.5"}, "--rho-uncond needs classifier-free guidance", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := sampleCmd(t, append([]string{save(c.rec)}, c.args...)...)
			var usage *cmdutil.UsageError
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &usage) != c.usage {
				t.Errorf("error %v, want one mentioning %q (usage error: %v)", err, c.want, c.usage)
			}
		})
	}
	// A flag the record would have broken is the user's own.
	if _, _, err := sampleCmd(t, save(checkpoint.Sampling{Process: checkpoint.ProcessDDPM, CFG: 4, Steps: trainSteps + 1}), "--steps", "2"); err != nil {
		t.Errorf("--steps 2 over a record of %d: %v", trainSteps+1, err)
	}
}

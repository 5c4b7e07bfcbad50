package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval/featnet"
)

// TestFeatnetTrainCheck trains a network for a few steps on 8×8 data,
// twice (the files must be identical), and checks it.
func TestFeatnetTrainCheck(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "f.safetensors")
	args := []string{"featnet", "train", "--steps", "3", "--samples", "32", "--batch", "4", "--heldout", "16", "--size", "8", "--seed", "3", "-q"}
	code, stdout, stderr := run(t, append(args, "--out", out)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "wrote "+out) || !strings.Contains(stdout, "held-out accuracy") {
		t.Errorf("summary %q", stdout)
	}
	again := filepath.Join(dir, "g.safetensors")
	code, stdout, stderr = run(t, append(args, "--out", again, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var tr map[string]any
	if err := json.Unmarshal([]byte(stdout), &tr); err != nil {
		t.Fatalf("--json: %v in %q", err, stdout)
	}
	for _, k := range []string{"heldout_accuracy", "dataset", "config", "params", "seconds"} {
		if _, ok := tr[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, stdout)
		}
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two runs with one seed wrote different files")
	}
	net, err := featnet.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if net.Info.Seed != 3 || net.Info.Steps != 3 || net.Info.Dataset != shapes.Version || net.Info.HeldOutSamples != 16 {
		t.Errorf("metadata %+v", net.Info)
	}

	code, stdout, stderr = run(t, "featnet", "check", "--model", out, "--num", "10,20", "--size", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Floors []featnet.Floor `json:"floors"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v in %q", err, stdout)
	}
	if len(res.Floors) != 2 || res.Floors[0].Num != 10 || res.Floors[1].Num != 20 || !(res.Floors[1].FD >= 0) {
		t.Errorf("floors %+v", res.Floors)
	}
	code, stdout, stderr = run(t, "featnet", "check", "--model", out, "--num", "10", "--size", "8")
	if code != 0 || !strings.Contains(stdout, "FD floor") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
}

func TestFeatnetErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, []byte("not a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"featnet", "train", "--steps", "0"}, 2, "--steps"},
		{[]string{"featnet", "train", "--size", "4"}, 2, "--size 4"},
		{[]string{"featnet", "train", "--seed", "9", "--heldout-seed", "9"}, 2, "--heldout-seed"},
		{[]string{"featnet", "train", "--out", filepath.Join(dir, "no", "f.safetensors")}, 1, "does not exist"},
		{[]string{"featnet", "check", "--num", "1"}, 2, "--num 1"},
		{[]string{"featnet", "check", "--model", bad}, 1, "bad.safetensors"},
		{[]string{"featnet", "frobnicate"}, 2, "unknown featnet command"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

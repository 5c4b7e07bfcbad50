package sample

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// parse runs the command's flag handling with runF capturing the options.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmd(ios, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.Err)
	err := cmd.Execute()
	return got, err
}

func TestFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want Options
	}{
		{"defaults", []string{"m.pt"}, Options{Checkpoint: "m.pt", Classes: []int{0}, Num: 1, Steps: 250, CFG: 4, Out: "samples.safetensors"}},
		{"everything", []string{"m.pt", "--class", "1,207", "--class", "3", "--num", "4", "--steps", "50", "--cfg", "1.5", "--cfg-all-channels",
			"--seed", "18446744073709551615", "--out", "x.safetensors", "--png", "x.png", "--num-heads", "6", "-q"},
			Options{Checkpoint: "m.pt", Classes: []int{1, 207, 3}, Num: 4, Steps: 50, CFG: 1.5, CFGAll: true, Seed: 1<<64 - 1, Out: "x.safetensors", PNG: "x.png", NumHeads: 6, Quiet: true}},
		{"guidance off", []string{"m.pt", "--cfg", "0"}, Options{Checkpoint: "m.pt", Classes: []int{0}, Num: 1, Steps: 250, CFG: 0, Out: "samples.safetensors"}},
		{"rho", []string{"m.pt", "--rho", "0.3"}, Options{Checkpoint: "m.pt", Classes: []int{0}, Num: 1, Steps: 250, CFG: 4, Out: "samples.safetensors", Rho: 0.3, RhoGiven: true}},
		{"rho 0 given", []string{"m.pt", "--rho", "0"}, Options{Checkpoint: "m.pt", Classes: []int{0}, Num: 1, Steps: 250, CFG: 4, Out: "samples.safetensors", RhoGiven: true}},
		{"lite-cfg", []string{"m.pt", "--rho", "0.3", "--rho-uncond", "0.9"}, Options{Checkpoint: "m.pt", Classes: []int{0}, Num: 1, Steps: 250, CFG: 4, Out: "samples.safetensors",
			Rho: 0.3, RhoUncond: 0.9, RhoGiven: true, RhoUncondGiven: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if !slices.Equal(got.Classes, c.want.Classes) {
				t.Errorf("classes %v, want %v", got.Classes, c.want.Classes)
			}
			got.Classes, c.want.Classes = nil, nil
			if !reflect.DeepEqual(*got, c.want) {
				t.Errorf("options %+v, want %+v", *got, c.want)
			}
		})
	}
}

// Flag values that are wrong whatever the checkpoint are usage errors, found
// before the checkpoint is opened.
func TestFlagUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"m.pt", "--steps", "0"}, "--steps 0"},
		{[]string{"m.pt", "--steps", "1001"}, "--steps 1001"},
		{[]string{"m.pt", "--num", "-2"}, "--num -2"},
		{[]string{"m.pt", "--class", "2,-1"}, "--class -1"},
		{[]string{"m.pt", "--cfg", "NaN"}, "--cfg NaN"},
		{[]string{"m.pt", "--num-heads", "-1"}, "--num-heads -1"},
		{[]string{"m.pt", "--out", ""}, "--out"},
		{[]string{"m.pt", "--out", "a/x", "--png", "a/./x"}, "--png and --out"},
		{[]string{"a.pt", "b.pt"}, "sample takes 1 argument(s)"},
		{[]string{"m.pt", "--rho", "1"}, "--rho 1: want 0 ≤ ρ < 1"},
		{[]string{"m.pt", "--dense-below", "-5"}, "--dense-below -5: want a timestep ≥ 0"},
		{[]string{"m.pt", "--rho", "-0.1"}, "--rho -0.1"},
		{[]string{"m.pt", "--rho", "NaN"}, "--rho NaN"},
		{[]string{"m.pt", "--rho", "0.99999999"}, "--rho 0.99999999"}, // 1 in float32
		{[]string{"m.pt", "--rho-uncond", "1.5"}, "--rho-uncond 1.5"},
		{[]string{"m.pt", "--rho-uncond", "0.5", "--cfg", "1"}, "--rho-uncond needs classifier-free guidance"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			got, err := parse(t, c.args...)
			var usage *cmdutil.UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a usage error mentioning %q", err, c.want)
			}
			if got != nil {
				t.Error("the action ran despite the usage error")
			}
		})
	}
}

package sample

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
)

// A class-conditional network sampled under Conditions by the DDPM
// process gives ddpm's own sampler's latents bit for bit, with and
// without guidance, seeing the labels ddpm would hand it ([y; null] when
// guided).
func TestLabelsMatchDDPM(t *testing.T) {
	sh := diffusion.Shape{B: 3, C: 4, HW: 5}
	sched, err := ddpm.Respaced(1000, "5")
	if err != nil {
		t.Fatal(err)
	}
	labels := []int{2, 0, 7}
	const null = 9
	net := func(seen *[][]int) func(x, tm []float32, y []int) ([]float32, error) {
		return func(x, tm []float32, y []int) ([]float32, error) {
			*seen = append(*seen, slices.Clone(y))
			per := len(x) / len(tm)
			out := make([]float32, len(tm)*2*sh.C*sh.HW)
			for b := range tm {
				for i := range sh.C * sh.HW { // ε; the variance values stay 0
					out[b*2*sh.C*sh.HW+i] = 0.2*x[b*per+i] + 1e-4*tm[b] + 0.05*float32(y[b])
				}
			}
			return out, nil
		}
	}
	conds := Conditions{Labels: labels, Null: null}
	for _, scale := range []float32{1, 4} {
		var got, want [][]int
		f := net(&got)
		model := func(x, tm []float32, guided bool) ([]float32, error) {
			in, err := conds.Input(tm, guided)
			if err != nil {
				return nil, err
			}
			return f(x, in.T, in.Labels)
		}
		x, err := (&diffusion.DDPM{Schedule: sched}).Sample(model, sh, diffusion.SampleOptions{Guidance: float64(scale), Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		legacy := net(&want)
		ref, err := sched.Sample(func(x []float32, tm []int, y []int) ([]float32, error) {
			ts := make([]float32, len(tm))
			for i, v := range tm {
				ts[i] = float32(v)
			}
			return legacy(x, ts, y)
		}, ddpm.Shape(sh), ddpm.SampleOptions{Classes: labels, Guidance: ddpm.Guidance{Scale: scale, NullClass: null}, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x, ref) || slices.ContainsFunc(x, func(v float32) bool { return v != v }) {
			t.Errorf("scale %g: latents %v differ from ddpm's sampler's %v", scale, x, ref)
		}
		if !reflect.DeepEqual(got, want) || len(got) != sched.Steps() {
			t.Errorf("scale %g: labels seen %v, ddpm's %v", scale, got, want)
		}
	}
}

func TestConditionsInput(t *testing.T) {
	caption := func(v float32) cond.Caption { return cond.Caption{Features: []float32{v, v}, Len: 1} }
	pos := []cond.Caption{caption(1), caption(2)}
	neg := []cond.Caption{caption(0), caption(-1)}
	tests := []struct {
		name    string
		c       Conditions
		t       []float32
		guided  bool
		want    cond.Input
		wantErr string
	}{
		{"labels", Conditions{Labels: []int{4, 1}, Null: 9}, []float32{5, 6}, false,
			cond.Input{T: []float32{5, 6}, Labels: []int{4, 1}}, ""},
		{"labels guided", Conditions{Labels: []int{4, 1}, Null: 9}, []float32{5, 6, 5, 6}, true,
			cond.Input{T: []float32{5, 6, 5, 6}, Labels: []int{4, 1, 9, 9}}, ""},
		{"captions", Conditions{Captions: pos, Negative: neg}, []float32{0.5, 0.5}, false,
			cond.Input{T: []float32{0.5, 0.5}, Captions: pos}, ""},
		{"captions guided", Conditions{Captions: pos, Negative: neg}, []float32{0.5, 0.5, 0.5, 0.5}, true,
			cond.Input{T: []float32{0.5, 0.5, 0.5, 0.5}, Captions: slices.Concat(pos, neg)}, ""},
		{"captions unguided need no negative", Conditions{Captions: pos}, []float32{0.5, 0.5}, false,
			cond.Input{T: []float32{0.5, 0.5}, Captions: pos}, ""},
		{"guided without negatives", Conditions{Captions: pos}, []float32{0.5, 0.5, 0.5, 0.5}, true,
			cond.Input{}, "an unconditional caption per sample: 0 for 2 captions"},
		{"times short", Conditions{Labels: []int{4, 1}}, []float32{5}, false,
			cond.Input{}, "1 model times for 2 samples (guided false), want 2"},
		{"guided times undoubled", Conditions{Labels: []int{4, 1}}, []float32{5, 6}, true,
			cond.Input{}, "2 model times for 2 samples (guided true), want 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Input(tt.t, tt.guided)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("input %+v, want %+v", got, tt.want)
			}
		})
	}
}

package diffusion

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
)

// A class-conditional network sampled through WithLabels and the DDPM
// process gives ddpm's own sampler's latents bit for bit, with and
// without guidance, seeing the labels ddpm would hand it ([y; null] when
// guided).
func TestWithLabelsMatchesDDPM(t *testing.T) {
	sh := Shape{B: 3, C: 4, HW: 5}
	sched, err := ddpm.Respaced(1000, "5")
	if err != nil {
		t.Fatal(err)
	}
	labels := []int{2, 0, 7}
	const null = 9
	net := func(seen *[][]int) LabelModel {
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
	for _, scale := range []float32{1, 4} {
		var got, want [][]int
		x, err := (&DDPM{Schedule: sched}).Sample(WithLabels(net(&got), labels, null), sh, SampleOptions{Guidance: float64(scale), Seed: 3})
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
	_, err = WithLabels(net(new([][]int)), labels, null)(make([]float32, 2*sh.C*sh.HW), []float32{1, 2}, false)
	if err == nil || !strings.Contains(err.Error(), "2 model times for 3 labels") {
		t.Errorf("mismatched batch: error %v", err)
	}
}

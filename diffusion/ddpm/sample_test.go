package ddpm

import (
	"fmt"
	"reflect"
	"testing"
)

func TestGuidedCombinesChannels(t *testing.T) {
	sh := Shape{B: 1, C: 4, HW: 1}
	// cond outputs 10+c, uncond outputs c, for the 2C = 8 channels.
	model := func(x []float32, ts []int, y []int) ([]float32, error) {
		if fmt.Sprint(y) != "[7 1000]" || len(x) != 8 || fmt.Sprint(ts) != "[5 5]" {
			return nil, fmt.Errorf("model got x %v t %v y %v", x, ts, y)
		}
		out := make([]float32, 16)
		for c := range 8 {
			out[c], out[8+c] = float32(10+c), float32(c)
		}
		return out, nil
	}
	cases := []struct {
		channels int
		want     []float32
	}{
		{0, []float32{40, 41, 42, 13, 14, 15, 16, 17}}, // DiT: 3 channels
		{4, []float32{40, 41, 42, 43, 14, 15, 16, 17}}, // diffusers: all C
	}
	for _, c := range cases {
		g := Guidance{Scale: 4, NullClass: 1000, Channels: c.channels}
		got, err := g.Guided(model, sh)([]float32{1, 2, 3, 4}, []int{5}, []int{7})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("channels %d: %v, want %v", c.channels, got, c.want)
		}
	}
}

func TestSampleVisitsEveryStepDescending(t *testing.T) {
	s, err := Respaced(1000, "5")
	if err != nil {
		t.Fatal(err)
	}
	sh := Shape{B: 2, C: 1, HW: 3}
	var seen []int
	model := func(x []float32, ts []int, y []int) ([]float32, error) {
		seen = append(seen, ts[0])
		return make([]float32, 2*len(x)), nil
	}
	var progress []int
	run := func() []float32 {
		out, err := s.Sample(model, sh, SampleOptions{Classes: []int{1, 2}, Seed: 9, Progress: func(d, n int) { progress = append(progress, d) }})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := run()
	if fmt.Sprint(seen) != "[999 749 500 250 0]" || fmt.Sprint(progress) != "[1 2 3 4 5]" {
		t.Errorf("model timesteps %v, progress %v", seen, progress)
	}
	if b := run(); !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave different samples")
	}
	if _, err := s.Sample(model, sh, SampleOptions{Classes: []int{1}}); err == nil {
		t.Error("a label count that does not match the batch was accepted")
	}
}

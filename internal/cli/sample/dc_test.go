package sample

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/internal/dctest"
)

// Guidance through ddpm.Guided around dcDenoiser, labelled by
// diffusion.WithLabels (as the DDPM process samples it), is the
// reference's Lite-CFG: the same numbers as dc.Model.LiteCFG on [x; x]
// with labels [y; null] at (ρ_cond, ρ_uncond), and the same kept counts.
func TestDenoiserIsLiteCFG(t *testing.T) {
	for _, c := range dctest.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m, _ := dctest.Model(t, c)
			cfg := m.Config
			n, C, HW := 2, cfg.InChannels, cfg.Tokens()
			rng := rand.New(rand.NewPCG(3, 4))
			x := make([]float32, n*C*HW)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			ts, ys := []int{999, 500}, []int{1, 7}
			nullClass := 10
			if v, ok := c.Int("num_classes"); ok {
				nullClass = v
			}
			const scale = 4
			for _, rho := range [][2]float32{{0, 0}, {0.3, 0.9}, {0.6, 0}} {
				stats := &dcStats{}
				guide := ddpm.Guidance{Scale: scale, NullClass: nullClass}
				model := diffusion.WithLabels(dcDenoiser(m, true, rho[0], rho[1], 0, stats), ys, nullClass)
				denoise := func(x []float32, t []int, _ []int) ([]float32, error) {
					tf := make([]float32, len(t))
					for i, v := range t {
						tf[i] = float32(v)
					}
					return model(x, tf, true)
				}
				got, err := guide.Guided(denoise, ddpm.Shape{B: n, C: C, HW: HW})(x, ts, ys)
				if err != nil {
					t.Fatal(err)
				}
				x2 := append(slices.Clone(x), x...)
				tf := []float32{999, 500, 999, 500}
				want, res, err := m.LiteCFG(x2, cond.Input{T: tf, Labels: append(slices.Clone(ys), nullClass, nullClass)}, scale, rho[0], rho[1])
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want[:len(got)]) {
					t.Errorf("ρ %v: guided denoiser output differs from LiteCFG", rho)
				}
				k := res.Chunks.NumKept
				if stats.Cond[0] != float64(k[0]+k[1])/2 || stats.Uncond[0] != float64(k[2]+k[3])/2 {
					t.Errorf("ρ %v: recorded kept %v / %v, LiteCFG kept %v", rho, stats.Cond, stats.Uncond, k)
				}
				if want := m.ForwardFLOPs(k).Total(); stats.FLOPs != want {
					t.Errorf("ρ %v: %v FLOPs recorded, want %v", rho, stats.FLOPs, want)
				}
			}
		})
	}
}

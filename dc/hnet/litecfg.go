package hnet

import (
	"fmt"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
)

// LiteCFG is the official DC-DiT's Lite-CFG sampling function
// (_make_lite_cfg_sample_fn), DiT's guidance rule on a DC model, kept as
// the reference that package sample's denoiser is tested against: the
// first half of x [2n, C, H, W] is run
// twice in one batch, the conditional copy (in's first n labels or
// captions) at tail-drop fraction condFrac and the unconditional one (its
// last n: the null class, or the negative captions) at uncondFrac; the
// first 3 output channels of both halves become
// uncond + scale·(cond − uncond) and the others stay per half. It returns
// [2n, OutChannels, H, W] and the forward's result.
func LiteCFG(m *dc.Model, x []float32, in cond.Input, scale, condFrac, uncondFrac float32) ([]float32, *dc.Result, error) {
	B := in.Samples()
	frac := make([]float32, B)
	for i := range frac {
		frac[i] = condFrac
		if i >= B/2 {
			frac[i] = uncondFrac
		}
	}
	return LiteCFGFracs(m, x, in, scale, frac)
}

// LiteCFGFracs is LiteCFG with one drop fraction per row of the combined
// batch (the n conditional rows, then the n unconditional ones), so that
// samples at different timesteps can run at different budgets.
func LiteCFGFracs(m *dc.Model, x []float32, in cond.Input, scale float32, frac []float32) ([]float32, *dc.Result, error) {
	cfg := m.Config
	B := in.Samples()
	if B%2 != 0 || len(x) != B*cfg.InChannels*cfg.Tokens() || len(frac) != B {
		return nil, nil, fmt.Errorf("hnet: lite-cfg: want an even batch of [cond; uncond] rows, got %d timesteps, %d drop fractions and %d latent values (%d per sample)", B, len(frac), len(x), cfg.InChannels*cfg.Tokens())
	}
	n, per := B/2, cfg.InChannels*cfg.Tokens()
	combined := append(append(make([]float32, 0, len(x)), x[:n*per]...), x[:n*per]...)
	out, res, err := m.Predict(combined, in, frac)
	if err != nil {
		return nil, nil, err
	}
	img := cfg.OutChannels * cfg.Tokens()
	guided := min(3, cfg.OutChannels) * cfg.Tokens()
	for b := range n {
		cond, uncond := out[b*img:b*img+guided], out[(n+b)*img:(n+b)*img+guided]
		for i := range guided {
			v := uncond[i] + scale*(cond[i]-uncond[i])
			cond[i], uncond[i] = v, v
		}
	}
	return out, res, nil
}

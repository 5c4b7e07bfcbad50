package dit

import (
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/dit/ddpm"
	"github.com/dcdit/dcdit/internal/fixtures"
)

const forwardTol = 5e-5

func loadFixtureModel(t *testing.T, c fixtures.Case, file string) *Model {
	t.Helper()
	heads, _ := c.Int("num_heads")
	path := filepath.Join(c.Dir, file)
	if file == "weights-diffusers.safetensors" {
		path = diffusersFolder(t, c)
		heads = 0 // the diffusers config says it
	}
	w, err := Load(path, LoadOptions{NumHeads: heads})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func floats(ints []int) []float32 {
	out := make([]float32, len(ints))
	for i, v := range ints {
		out[i] = float32(v)
	}
	return out
}

// The model reproduces the reference forward, its intermediates and
// forward_with_cfg, from either naming.
func TestFixtureForward(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		io := c.Open(t, "io.safetensors")
		for _, file := range []string{"weights.safetensors", "weights-diffusers.safetensors"} {
			t.Run(file, func(t *testing.T) {
				m := loadFixtureModel(t, c, file)
				cfg := m.Config
				check := func(name string, got []float32) {
					t.Helper()
					if e := fixtures.RelErr(got, io.F32(name)); e > forwardTol {
						t.Errorf("%s: err %.3g > %g", name, e, forwardTol)
					}
				}
				x, ts, y := io.F32("x"), floats(io.Ints("t")), io.Ints("y")
				B := len(ts)
				cond := m.Condition(ts, y)
				check("c", mat.Data[float32](cond.Value()))
				tokens, offsets := m.Embed(x, B)
				check("tokens_in", mat.Data[float32](tokens.Value()))
				check("block0_out", mat.Data[float32](m.Block(0, tokens, cond, offsets).Value()))

				out := m.Forward(x, ts, y)
				img := make([]float32, B*cfg.OutChannels()*cfg.InputSize*cfg.InputSize)
				Unpatchify(img, mat.Data[float32](out.Value()), B, cfg.OutChannels(), cfg.InputSize, cfg.PatchSize, false)
				check("out", img)

				// forward_with_cfg: only the first half of cfg_x is used.
				cx, ct, cy := io.F32("cfg_x"), io.Ints("cfg_t"), io.Ints("cfg_y")
				half := len(ct) / 2
				scale := io.F32("cfg_scale")[0]
				null, _ := c.Int("null_class")
				sh := ddpm.Shape{B: half, C: cfg.InChannels, HW: cfg.InputSize * cfg.InputSize}
				g := ddpm.Guidance{Scale: scale, NullClass: null}
				guided := g.Guided(m.Denoiser(), sh)
				res, err := guided(cx[:len(cx)/2], ct[:half], cy[:half])
				if err != nil {
					t.Fatal(err)
				}
				// Both halves of the reference output carry the guided
				// channels; the conditional half is ours.
				want := io.F32("cfg_out")[:len(res)]
				if e := fixtures.RelErr(res, want); e > forwardTol {
					t.Errorf("cfg_out: err %.3g", e)
				}
			})
		}
	})
}

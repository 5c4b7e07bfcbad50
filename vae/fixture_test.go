package vae

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// forwardTol bounds every output and intermediate (the fixture READMEs:
// a float64 re-run of the reference stays within 3.5e-6).
const forwardTol = 5e-5

// vaeInputs are the inputs of a vae-*-tiny io.safetensors (the README's
// table); every other tensor is computed and compared.
var vaeInputs = []string{"image", "noise", "z", "z2", "clamp_probe.moments"}

// traceNames maps the forward passes' trace points to the io tensors that
// hold them. The encoder's mid attention is traced too, but the fixtures
// record only the decoder's.
var traceNames = map[string]string{"dec.mid.attn.in": "mid.attn.in", "dec.mid.attn.out": "mid.attn.out", "enc.mid.attn.in": "", "enc.mid.attn.out": ""}

// collector gathers a batch's traced intermediates, sample by sample, into
// NHWC batch tensors.
type collector struct {
	batch int
	vals  map[string][]float32
	dims  map[string][3]int
}

func newCollector(batch int) *collector {
	return &collector{batch: batch, vals: map[string][]float32{}, dims: map[string][3]int{}}
}

func (c *collector) add(b0 int, name string, a act) {
	per := a.h * a.w * a.c
	v, ok := c.vals[name]
	if !ok {
		v = make([]float32, c.batch*per)
		c.vals[name], c.dims[name] = v, [3]int{a.h, a.w, a.c}
	}
	copy(v[b0*per:], a.v)
}

// record puts every traced tensor into got as NCHW, under its io name.
func (c *collector) record(got *fixtures.Got) {
	for name, v := range c.vals {
		io, ok := traceNames[name]
		if !ok {
			io = name
		}
		if io == "" {
			continue
		}
		d := c.dims[name]
		got.F32(io, toNCHW(v, c.batch, d[0], d[1], d[2]), forwardTol)
	}
}

// computeFixture runs the case's computation with model m: encode the
// image (with intermediates), the posterior and its sample, the scaled
// latents, decode z (with intermediates) and z2, and the clamp probe.
func computeFixture(t *testing.T, c fixtures.Case, m *Model) *fixtures.Got {
	t.Helper()
	io := c.Open(t, ioFile)
	got := fixtures.NewGot()

	img, B, _, H, W := nchw(t, io, "image")
	enc := newCollector(B)
	post, err := m.encodeTrace(img, B, H, W, chunkBudget, enc.add)
	if err != nil {
		t.Fatal(err)
	}
	enc.record(got)
	lat := func(v []float32) []float32 { return toNCHW(v, post.Batch, post.H, post.W, post.Channels) }
	got.F32("posterior.mean", lat(post.Mean), forwardTol)
	got.F32("posterior.logvar", lat(post.LogVar), forwardTol)
	got.F32("posterior.std", lat(post.Std), forwardTol)
	noise, _, _, _, _ := nchw(t, io, "noise")
	sample, err := post.Sample(noise)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("posterior.sample", lat(sample), forwardTol)
	scaled := slices.Clone(post.Mean)
	m.Config.Scale(scaled)
	got.F32("latents_scaled", lat(scaled), forwardTol)
	unscaled := slices.Clone(scaled)
	m.Config.Unscale(unscaled)
	got.F32("latents_unscaled", lat(unscaled), forwardTol)
	m.Config.Scale(sample)
	got.F32("sample_scaled", lat(sample), forwardTol)

	z, zb, _, zh, zw := nchw(t, io, "z")
	dec := newCollector(zb)
	decoded, err := m.decodeTrace(z, zb, zh, zw, chunkBudget, dec.add)
	if err != nil {
		t.Fatal(err)
	}
	dec.record(got)
	got.F32("decoded", toNCHW(decoded, zb, m.ImageSize(zh), m.ImageSize(zw), m.Config.OutChannels), forwardTol)
	z2, b2, _, h2, w2 := nchw(t, io, "z2")
	decoded2, err := m.Decode(z2, b2, h2, w2)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("decoded2", toNCHW(decoded2, b2, m.ImageSize(h2), m.ImageSize(w2), m.Config.OutChannels), forwardTol)

	mom, pb, pc, ph, pw := nchw(t, io, "clamp_probe.moments")
	probe, err := NewPosterior(mom, pb, ph, pw, pc/2)
	if err != nil {
		t.Fatal(err)
	}
	plat := func(v []float32) []float32 { return toNCHW(v, pb, ph, pw, pc/2) }
	// The clamped values are exactly LogVarMin and LogVarMax.
	got.F32("clamp_probe.logvar", plat(probe.LogVar), 0)
	got.F32("clamp_probe.std", plat(probe.Std), forwardTol)
	got.F32("clamp_probe.var", plat(probe.Var()), forwardTol)
	return got
}

func compareFixture(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, ioFile), vaeInputs, got, logf)
}

// loadings are the ways a fixture's weights are opened: its diffusers
// weights as a VAE folder, and its LDM single file with the folder's
// config (the tiny widths need norm_num_groups from it).
var loadings = []struct {
	name string
	open func(t *testing.T, c fixtures.Case) (*Model, error)
}{
	{"diffusers-folder", func(t *testing.T, c fixtures.Case) (*Model, error) {
		return Open(vaeFolder(t, c, filepath.Join(c.Dir, weightsFile)))
	}},
	{"ldm-file", func(t *testing.T, c fixtures.Case) (*Model, error) {
		return OpenWithConfig(filepath.Join(c.Dir, ldmFile), caseConfig(t, c))
	}},
}

// The encoder, posterior, latent scaling and decoder match diffusers'
// AutoencoderKL on every tensor of io.safetensors, from either naming.
func TestFixtureParity(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		for _, l := range loadings {
			t.Run(l.name, func(t *testing.T) {
				m, err := l.open(t, c)
				if err != nil {
					t.Fatal(err)
				}
				fixtures.Report(t, compareFixture(c, computeFixture(t, c, m), t.Logf))
			})
		}
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails TestFixtureParity's comparison.
func TestFixtureMutations(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		m, err := loadings[0].open(t, c)
		if err != nil {
			t.Fatal(err)
		}
		got := computeFixture(t, c, m)
		fixtures.CheckMutations(t, c, ioFile, vaeInputs, func(mc fixtures.Case) []error {
			return compareFixture(mc, got, nil)
		})
	})
}

// Weights stored as F16 or BF16 load as their float32 values: a model from
// the half-precision file computes exactly what a model from an F32 file
// of the rounded values does, and stays near the reference.
func TestFixtureHalfPrecision(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		for _, tc := range []struct {
			dt  string
			tol float64 // decoded image against the F32 reference
		}{{"F16", 1e-2}, {"BF16", 5e-2}} {
			t.Run(tc.dt, func(t *testing.T) {
				half, rounded := halfWeights(t, c, tc.dt)
				mh, err := Open(half)
				if err != nil {
					t.Fatal(err)
				}
				mr, err := Open(rounded)
				if err != nil {
					t.Fatal(err)
				}
				io := c.Open(t, ioFile)
				img, B, _, H, W := nchw(t, io, "image")
				z, zb, _, zh, zw := nchw(t, io, "z")
				for _, run := range []func(m *Model) ([]float32, error){
					func(m *Model) ([]float32, error) {
						p, err := m.Encode(img, B, H, W)
						if err != nil {
							return nil, err
						}
						return p.Mean, nil
					},
					func(m *Model) ([]float32, error) { return m.Decode(z, zb, zh, zw) },
				} {
					a, err := run(mh)
					if err != nil {
						t.Fatal(err)
					}
					b, err := run(mr)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(a, b) {
						t.Errorf("%s weights compute %g (max-abs relative) away from their F32-rounded values", tc.dt, fixtures.RelErr(a, b))
					}
				}
				decoded, err := mh.Decode(z, zb, zh, zw)
				if err != nil {
					t.Fatal(err)
				}
				want := io.F32("decoded")
				e := fixtures.RelErr(toNCHW(decoded, zb, mh.ImageSize(zh), mh.ImageSize(zw), mh.Config.OutChannels), want)
				t.Logf("%s decoded: relative error %.3g against the F32 reference", tc.dt, e)
				if !fixtures.Within(e, tc.tol) {
					t.Errorf("%s decoded: relative error %.3g > %g", tc.dt, e, tc.tol)
				}
			})
		}
	})
}

// halfWeights writes the case's diffusers weights in dtype dt as a VAE
// folder (the fp16 variant name, the only weights there), and the same
// rounded values as F32 in another folder.
func halfWeights(t *testing.T, c fixtures.Case, dt string) (half, rounded string) {
	t.Helper()
	d, err := dtype.Parse(dt)
	if err != nil {
		t.Fatal(err)
	}
	half, rounded = t.TempDir(), t.TempDir()
	ts := readTensors(t, filepath.Join(c.Dir, weightsFile))
	hs, rs := make([]safetensors.WriteTensor, len(ts)), make([]safetensors.WriteTensor, len(ts))
	for i, w := range ts {
		v, err := dtype.ToFloat32(w.Data, w.DType)
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, len(v)*d.Size())
		if err := dtype.EncodeFloat32(raw, v, d); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, len(v))
		if err := dtype.DecodeFloat32(back, raw, d); err != nil {
			t.Fatal(err)
		}
		hs[i] = safetensors.WriteTensor{Name: w.Name, DType: d, Shape: w.Shape, Data: raw}
		rs[i] = f32Tensor(w.Name, w.Shape, back)
	}
	writeTensors(t, filepath.Join(half, "diffusion_pytorch_model.fp16.safetensors"), hs)
	writeTensors(t, filepath.Join(rounded, folderWeights[0]), rs)
	for _, dir := range []string{half, rounded} {
		link(t, filepath.Join(c.Dir, "config.json"), filepath.Join(dir, "config.json"))
	}
	return half, rounded
}

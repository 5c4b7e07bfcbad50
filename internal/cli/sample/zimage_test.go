package sample

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/zimage"
)

// writeCaps writes n captions of L rows of dim seeded random features
// with the given valid lengths.
func writeCaps(t *testing.T, path string, L, dim int, lens []int64, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	feats := make([]float32, len(lens)*L*dim)
	for i := range feats {
		feats[i] = float32(rng.NormFloat64())
	}
	raw := make([]byte, 8*len(lens))
	for i, v := range lens {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	err := safetensors.Write(path, []safetensors.WriteTensor{
		{Name: capFeatsName, DType: dtype.F32, Shape: []int64{int64(len(lens)), int64(L), int64(dim)}, Data: dtype.F32Bytes(feats)},
		{Name: capLensName, DType: dtype.I64, Shape: []int64{int64(len(lens))}, Data: raw},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// The command's run is the Euler loop of diffusion/flowmatch written out by
// hand around zimage.Model.Forward: model time 1 − σ, the step
// x + (σ_{i+1} − σ_i)·(−out), and with guidance one forward of the
// doubled batch [positive captions; negative captions] combined as
// pos + s·(pos − neg). Under Tongyi's rule --cfg 1 is that loop without
// guidance, the negative captions unused.
func TestZImageLoop(t *testing.T) {
	root, err := fixtures.Root()
	if err != nil {
		t.Fatal(err)
	}
	found, err := fixtures.Discover(root, "zimage-tiny")
	if err != nil || len(found) == 0 {
		t.Fatalf("no zimage-tiny case under %s (%v)", root, err)
	}
	fc := found[0]
	weights := filepath.Join(fc.Dir, "weights.safetensors")
	w, err := zimage.Load(weights, zimage.LoadOptions{Config: fc.Config})
	if err != nil {
		t.Fatal(err)
	}
	m, err := zimage.New(w)
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.Config
	dir := t.TempDir()
	capsPath, negPath := filepath.Join(dir, "caps.safetensors"), filepath.Join(dir, "neg.safetensors")
	writeCaps(t, capsPath, 35, cfg.CapFeatDim, []int64{35, 4}, 1)
	writeCaps(t, negPath, 6, cfg.CapFeatDim, []int64{6, 2}, 2)
	pos, err := readCaptions("--captions", capsPath, cfg.CapFeatDim)
	if err != nil {
		t.Fatal(err)
	}
	neg, err := readCaptions("--negative", negPath, cfg.CapFeatDim)
	if err != nil {
		t.Fatal(err)
	}
	N, C, H, W := 2, cfg.InChannels, 3*cfg.PatchSize, 2*cfg.PatchSize
	const steps, seed = 3, 5

	cases := []struct {
		name     string
		schedule flowmatch.Pipeline
		cfg      float64
		guided   bool
	}{
		{"tongyi cfg 1 is unguided", flowmatch.Tongyi, 1, false},
		{"tongyi cfg 0", flowmatch.Tongyi, 0, false},
		{"diffusers cfg 1 guides", flowmatch.Diffusers, 1, true},
		{"tongyi cfg 2.5", flowmatch.Tongyi, 2.5, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			out := filepath.Join(t.TempDir(), "z.safetensors")
			opts := &Options{IO: ios, Checkpoint: weights, Config: filepath.Join(fc.Dir, "config.json"), Captions: capsPath, Negative: negPath,
				Size: fmt.Sprintf("%dx%d", H, W), Steps: steps, CFG: c.cfg, Seed: seed, Schedule: c.schedule.String(), Out: out,
				Classes: []int{0}, Num: 1, Quiet: true}
			if err := Run(opts); err != nil {
				t.Fatal(err)
			}
			got, _ := readLatents(t, out)

			sched, err := flowmatch.DefaultConfig().Schedule(c.schedule, steps)
			if err != nil {
				t.Fatal(err)
			}
			per := C * H * W
			x := gaussianNoise(seed, N*per)
			for i, ts := range sched.Timesteps {
				tm := flowmatch.ModelTime(ts)
				caps := pos.feats
				if c.guided {
					caps = slices.Concat(pos.feats, neg.feats)
				}
				lats := make([]zimage.Latent, len(caps))
				times := make([]float32, len(caps))
				for j := range lats {
					lats[j] = zimage.Latent{Data: x[(j%N)*per : (j%N+1)*per], F: 1, H: H, W: W}
					times[j] = tm
				}
				outs, err := m.Forward(lats, times, caps)
				if err != nil {
					t.Fatal(err)
				}
				dt := sched.Sigmas[i+1] - sched.Sigmas[i]
				next := make([]float32, len(x))
				// The explicit conversions round each product as the
				// sampler does, so no multiply-add is fused.
				s := float32(c.cfg)
				for j := range N {
					for k := range per {
						pred := outs[j][k]
						if c.guided {
							pred = outs[j][k] + float32(s*(outs[j][k]-outs[N+j][k]))
						}
						next[j*per+k] = x[j*per+k] + float32(dt*-pred)
					}
				}
				x = next
			}
			if !slices.Equal(got, x) {
				t.Errorf("the command's latents differ from the hand-written loop")
			}
		})
	}
}

// gaussianNoise draws n standard normal values from seed: the initial
// latents [N, C, H, W] at σ = 1 as the CLI has always drawn them, written
// out here so that the test checks diffusion.FlowMatch's draw against it.
func gaussianNoise(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// readLatents reads a latents file the command wrote: its values and
// metadata.
func readLatents(t *testing.T, path string) ([]float32, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lt, ok := f.Tensor("latents")
	if !ok {
		t.Fatalf("%s holds no latents", path)
	}
	v, err := lt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	// Copy: the values may alias the file's map, which Close releases.
	return append([]float32(nil), v...), f.Metadata()
}

package vae

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// sameWeights fails unless a and b hold the same configuration and values.
func sameWeights(t *testing.T, a, b *Model) {
	t.Helper()
	if !equalConfig(&a.Config, &b.Config) {
		t.Fatalf("configs differ: %+v and %+v", a.Config, b.Config)
	}
	ta, tb := flatten(a), flatten(b)
	if !slices.Equal(ta, tb) {
		t.Fatalf("weights differ (%d and %d values)", len(ta), len(tb))
	}
}

func equalConfig(a, b *Config) bool {
	return slices.Equal(a.BlockOutChannels, b.BlockOutChannels) && a.InChannels == b.InChannels && a.OutChannels == b.OutChannels &&
		a.LayersPerBlock == b.LayersPerBlock && a.LatentChannels == b.LatentChannels && a.NormNumGroups == b.NormNumGroups &&
		a.MidBlockAddAttention == b.MidBlockAddAttention && a.UseQuantConv == b.UseQuantConv && a.UsePostQuantConv == b.UsePostQuantConv &&
		a.ScalingFactor == b.ScalingFactor && a.ShiftFactor == b.ShiftFactor
}

// flatten lists a model's values in the builder's order.
func flatten(m *Model) []float32 {
	var out []float32
	add := func(vs ...[]float32) {
		for _, v := range vs {
			out = append(out, v...)
		}
	}
	convs := func(cs ...*conv) {
		for _, c := range cs {
			if c != nil {
				add(c.w, c.b)
			}
		}
	}
	res := func(r *resnet) {
		add(r.norm1.w, r.norm1.b, r.norm2.w, r.norm2.b)
		convs(&r.conv1, &r.conv2, r.shortcut)
	}
	mid := func(mb *midBlock) {
		res(&mb.res[0])
		res(&mb.res[1])
		if a := mb.attn; a != nil {
			add(a.norm.w, a.norm.b, a.qkvW, a.qkvB, a.outW, a.outB)
		}
	}
	stages := func(ss []stage) {
		for i := range ss {
			for j := range ss[i].resnets {
				res(&ss[i].resnets[j])
			}
			convs(ss[i].sampler)
		}
	}
	convs(&m.enc.convIn, &m.enc.convOut, &m.dec.convIn, &m.dec.convOut, m.quant, m.postQuant)
	add(m.enc.normOut.w, m.enc.normOut.b, m.dec.normOut.w, m.dec.normOut.b)
	stages(m.enc.blocks)
	stages(m.dec.blocks)
	mid(&m.enc.mid)
	mid(&m.dec.mid)
	return out
}

// A pipeline folder's vae/ subfolder, a VAE folder and the LDM single file
// load the same weights; so does an LDM file inside a full checkpoint,
// whose other models' tensors are ignored.
func TestOpenForms(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		cfg := caseConfig(t, c)
		ref, err := Open(vaeFolder(t, c, filepath.Join(c.Dir, weightsFile)))
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "vae"), 0o755); err != nil {
			t.Fatal(err)
		}
		link(t, filepath.Join(c.Dir, "config.json"), filepath.Join(root, "vae", "config.json"))
		link(t, filepath.Join(c.Dir, weightsFile), filepath.Join(root, "vae", folderWeights[0]))
		m, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		sameWeights(t, ref, m)

		// An LDM file under LDMPrefix beside a UNet and a text encoder.
		ts := readTensors(t, filepath.Join(c.Dir, ldmFile))
		for i := range ts {
			ts[i].Name = LDMPrefix + strings.TrimPrefix(ts[i].Name, LDMPrefix)
		}
		ts = append(ts, f32Tensor("model.diffusion_model.out.2.bias", []int64{2}, []float32{1, 2}),
			f32Tensor("cond_stage_model.transformer.text_model.final_layer_norm.bias", []int64{1}, []float32{3}))
		full := filepath.Join(t.TempDir(), "sd.safetensors")
		writeTensors(t, full, ts)
		m, err = OpenWithConfig(full, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sameWeights(t, ref, m)
		if !strings.Contains(m.Source, "ldm naming") {
			t.Errorf("Source %q does not name the LDM naming", m.Source)
		}
	})
}

// Without config.json the configuration comes from the shapes, with 32
// groups and the scaling of the family the layout identifies.
func TestInferConfig(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    Config
		naming Naming
		prefix string
		err    string
	}{
		{name: "sd", cfg: Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32, 64}, LayersPerBlock: 1, LatentChannels: 4,
			NormNumGroups: 32, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor},
			naming: LDM, prefix: LDMPrefix},
		{name: "flux", cfg: Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32, 32, 64}, LayersPerBlock: 2, LatentChannels: 16,
			NormNumGroups: 32, MidBlockAddAttention: true, ScalingFactor: FluxScalingFactor, ShiftFactor: FluxShiftFactor},
			naming: LDM},
		{name: "diffusers-no-attention", cfg: Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32}, LayersPerBlock: 1, LatentChannels: 4,
			NormNumGroups: 32, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor},
			naming: Diffusers},
		{name: "unknown-family", cfg: Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32}, LayersPerBlock: 1, LatentChannels: 8,
			NormNumGroups: 32, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: 1},
			naming: Diffusers, err: "give it a config.json"},
		{name: "groups", cfg: Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{16}, LayersPerBlock: 1, LatentChannels: 4,
			NormNumGroups: 8, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor},
			naming: Diffusers, err: "norm_num_groups 32 is assumed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ref, ts := randomTensors(t, &tt.cfg, 7)
			path := filepath.Join(t.TempDir(), "vae.safetensors")
			if tt.naming == LDM {
				ts = toLDM(t, ts, tt.prefix)
			}
			writeTensors(t, path, ts)
			m, err := Open(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sameWeights(t, ref, m)
		})
	}
}

// toLDM renames diffusers tensors to the LDM naming under prefix.
func toLDM(t *testing.T, ts []safetensors.WriteTensor, prefix string) []safetensors.WriteTensor {
	t.Helper()
	specs := make([]TensorSpec, len(ts))
	byName := map[string]safetensors.WriteTensor{}
	for i, w := range ts {
		specs[i] = TensorSpec{Name: w.Name, Shape: w.Shape}
		byName[w.Name] = w
	}
	rs, err := ConvertNames(specs, LDM, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]safetensors.WriteTensor, len(rs))
	for i, r := range rs {
		w := byName[r.From]
		w.Name, w.Shape = r.To, r.ToShape
		out[i] = w
	}
	return out
}

// Loading refuses damaged or mismatched checkpoints with an error naming
// the file, the tensor or key, and what was expected and found.
func TestOpenErrors(t *testing.T) {
	runKinds(t, func(t *testing.T, c fixtures.Case) {
		weights := filepath.Join(c.Dir, weightsFile)
		cfgText, err := os.ReadFile(filepath.Join(c.Dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		edit := func(f func(ts []safetensors.WriteTensor) []safetensors.WriteTensor) func(dir string) {
			return func(dir string) {
				writeTensors(t, filepath.Join(dir, folderWeights[0]), f(readTensors(t, weights)))
			}
		}
		for _, tt := range []struct {
			name    string
			weights func(dir string) // writes the folder's weights
			config  func(text string) string
			want    []string // substrings of the error
		}{
			{name: "missing tensor", weights: edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == "decoder.conv_in.bias" })
			}), want: []string{folderWeights[0], `tensor "decoder.conv_in.bias" missing (want shape [`}},
			{name: "wrong shape", weights: edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i, w := range ts {
					if w.Name == "encoder.conv_in.weight" {
						ts[i] = f32Tensor(w.Name, []int64{w.Shape[0], 4, 3, 3}, make([]float32, int(w.Shape[0])*36))
					}
				}
				return ts
			}), want: []string{`tensor "encoder.conv_in.weight": shape [`, "4 3 3], want [", "3 3 3]"}},
			{name: "unexpected tensor", weights: edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, f32Tensor("encoder.down_blocks.0.resnets.9.conv1.bias", []int64{1}, []float32{0}))
			}), want: []string{`unexpected tensors "encoder.down_blocks.0.resnets.9.conv1.bias" [1]`}},
			{name: "foreign tensor", weights: edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, f32Tensor("text_model.final_layer_norm.bias", []int64{1}, []float32{0}))
			}), want: []string{`"text_model.final_layer_norm.bias"`, "not AutoencoderKL tensors in the diffusers naming"}},
			{name: "truncated file", weights: func(dir string) {
				raw, err := os.ReadFile(weights)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, folderWeights[0]), raw[:len(raw)-100], 0o644); err != nil {
					t.Fatal(err)
				}
			}, want: []string{folderWeights[0]}},
			{name: "unknown act_fn", config: func(s string) string {
				return strings.Replace(s, `"act_fn": "silu"`, `"act_fn": "gelu"`, 1)
			}, want: []string{"config.json", `act_fn "gelu"`}},
			{name: "latent channel mismatch", config: func(s string) string {
				return strings.Replace(s, `"latent_channels": `, `"latent_channels": 1`, 1)
			}, want: []string{`tensor "decoder.conv_in.weight": shape [`, "want ["}},
			{name: "block type", config: func(s string) string {
				return strings.Replace(s, `"UpDecoderBlock2D"`, `"AttnUpDecoderBlock2D"`, 1)
			}, want: []string{`up_block_types[0] is "AttnUpDecoderBlock2D"`}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				text := string(cfgText)
				if tt.config != nil {
					text = tt.config(text)
					if text == string(cfgText) {
						t.Fatal("the edit left config.json unchanged")
					}
				}
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				if tt.weights != nil {
					tt.weights(dir)
				} else {
					link(t, weights, filepath.Join(dir, folderWeights[0]))
				}
				m, err := Open(dir)
				if err == nil {
					t.Fatalf("loaded %s", m.Source)
				}
				t.Log(err)
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			})
		}
		// The tiny widths do not split into the 32 groups assumed without
		// a config.json.
		if _, err := Open(filepath.Join(c.Dir, ldmFile)); err == nil || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("opening %s without its config: %v, want an error asking for config.json", ldmFile, err)
		}
		if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), folderWeights[0]) {
			t.Errorf("opening an empty folder: %v, want an error naming %s", err, folderWeights[0])
		}
	})
}

// Encode and Decode check their arguments.
func TestForwardArgs(t *testing.T) {
	cfg := Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{8, 8, 8}, LayersPerBlock: 1, LatentChannels: 4,
		NormNumGroups: 4, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: 1}
	m := randomModel(t, &cfg, 3, nil)
	for _, tt := range []struct {
		name string
		run  func() error
	}{
		{"encode short", func() error { _, err := m.Encode(make([]float32, 3*8*8-1), 1, 8, 8); return err }},
		{"encode batch 0", func() error { _, err := m.Encode(nil, 0, 8, 8); return err }},
		{"encode too small", func() error { _, err := m.Encode(make([]float32, 3*3*8), 1, 3, 8); return err }},
		{"decode long", func() error { _, err := m.Decode(make([]float32, 4*2*2+1), 1, 2, 2); return err }},
		{"decode empty", func() error { _, err := m.Decode(nil, 1, 0, 2); return err }},
		{"sample", func() error {
			p, err := m.Encode(make([]float32, 3*8*8), 1, 8, 8)
			if err != nil {
				return nil
			}
			_, err = p.Sample(make([]float32, 3))
			return err
		}},
	} {
		if err := tt.run(); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	// Sides down to 4 (two downsamplers: 4 → 2 → 1) and odd ones work.
	for _, hw := range [][2]int{{4, 4}, {5, 9}, {13, 6}} {
		p, err := m.Encode(make([]float32, 3*hw[0]*hw[1]), 1, hw[0], hw[1])
		if err != nil {
			t.Errorf("%v: %v", hw, err)
			continue
		}
		if p.H != hw[0]/4 || p.W != hw[1]/4 {
			t.Errorf("%v: latent %d×%d, want %d×%d", hw, p.H, p.W, hw[0]/4, hw[1]/4)
		}
	}
}

// A batch gives the same result whether it runs whole, one sample at a
// time, or in chunks of two with a shorter last one.
func TestChunks(t *testing.T) {
	cfg := Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{8, 16, 16}, LayersPerBlock: 1, LatentChannels: 4,
		NormNumGroups: 4, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: 1}
	m := randomModel(t, &cfg, 5, nil)
	const batch, h, w = 5, 12, 20
	x := randomLatent(batch*h*w*cfg.InChannels, 8)
	z := randomLatent(batch*3*5*cfg.LatentChannels, 9)
	sampleBytes := func(pass func(e *exec, n int)) int {
		e, _ := plan(cfg.NormNumGroups, 1, 0, pass)
		n := 0
		for _, s := range e.sizes {
			n += 4 * s
		}
		return n
	}
	encBytes := sampleBytes(func(e *exec, n int) { e.encode(m, e.external(nil, n, h, w, 3), nil) })
	decBytes := sampleBytes(func(e *exec, n int) { e.decode(m, e.external(nil, n, 3, 5, 4), nil) })
	var refEnc, refDec []float32
	for _, tt := range []struct {
		name     string
		enc, dec int // budgets
	}{{"whole", 1 << 40, 1 << 40}, {"single", 0, 0}, {"pairs", 2*encBytes + 1, 2*decBytes + 1}} {
		p, err := m.encodeTrace(x, batch, h, w, tt.enc, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := m.decodeTrace(z, batch, 3, 5, tt.dec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if refEnc == nil {
			refEnc, refDec = p.Mean, d
			continue
		}
		if e := fixtures.RelErr(p.Mean, refEnc); !fixtures.Within(e, 1e-6) {
			t.Errorf("%s: encode differs from the whole batch's by %.3g", tt.name, e)
		}
		if e := fixtures.RelErr(d, refDec); !fixtures.Within(e, 1e-6) {
			t.Errorf("%s: decode differs from the whole batch's by %.3g", tt.name, e)
		}
	}
}

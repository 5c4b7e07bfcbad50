package cli

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// tinyVAE is a VAE fixture laid out as a diffusers VAE folder.
type tinyVAE struct {
	dir            string
	scale, latentC int
}

// vaeFolder copies the first case of the VAE fixture kind into a diffusers
// folder (config.json, diffusion_pytorch_model.safetensors).
func vaeFolder(t *testing.T, kind string) tinyVAE {
	t.Helper()
	root, err := fixtures.Root()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixtures.Discover(root, kind)
	if err != nil || len(cases) == 0 {
		t.Fatalf("no %s fixture case under %s (%v)", kind, root, err)
	}
	c := cases[0]
	dir := t.TempDir()
	for src, dst := range map[string]string{"config.json": "config.json", "weights.safetensors": "diffusion_pytorch_model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(c.Dir, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tinyVAE{dir: dir, scale: c.PositiveInt(t, "vae_scale_factor"), latentC: c.PositiveInt(t, "latent_channels")}
}

func pngSize(t *testing.T, path string) (w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

func TestSampleVAEPictures(t *testing.T) {
	d := ditTinyCase(t)
	v := vaeFolder(t, "vae-sd-tiny")
	if v.latentC != d.channels {
		t.Skipf("the VAE fixture has %d latent channels, the DiT fixture %d", v.latentC, d.channels)
	}
	pngPath := filepath.Join(t.TempDir(), "pictures.png")
	_, code, stdout, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--class", d.class(1)+","+d.class(2), "--num", "3", "--png", pngPath, "--vae", v.dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "wrote "+pngPath+": pictures decoded by the VAE") {
		t.Errorf("stdout = %q", stdout)
	}
	// One row per class, --num columns, 2 pixels between and around them.
	tile := v.scale * d.size
	if w, h := pngSize(t, pngPath); w != 3*(tile+2)+2 || h != 2*(tile+2)+2 {
		t.Errorf("grid is %dx%d, want %dx%d", w, h, 3*(tile+2)+2, 2*(tile+2)+2)
	}
}

func TestDecode(t *testing.T) {
	d := ditTinyCase(t)
	v := vaeFolder(t, "vae-sd-tiny")
	if v.latentC != d.channels {
		t.Skipf("the VAE fixture has %d latent channels, the DiT fixture %d", v.latentC, d.channels)
	}
	latents, code, _, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--class", d.class(0), "--num", "3")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, stderr)
	}
	dir := t.TempDir()
	out, grid, npzPath := filepath.Join(dir, "pics"), filepath.Join(dir, "grid.png"), filepath.Join(dir, "s.npz")
	code, stdout, stderr := run(t, "decode", latents, "--vae", v.dir, "--out", out, "--grid", grid, "--cols", "2", "--npz", npzPath)
	if code != 0 {
		t.Fatalf("decode: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "decoded 3 samples") {
		t.Errorf("stdout = %q", stdout)
	}
	side := v.scale * d.size
	for i := range 3 {
		if w, h := pngSize(t, filepath.Join(out, strconv.Itoa(1000000 + i)[1:]+".png")); w != side || h != side {
			t.Errorf("picture %d is %dx%d, want %dx%d", i, w, h, side, side)
		}
	}
	if w, h := pngSize(t, grid); w != 2*(side+2)+2 || h != 2*(side+2)+2 {
		t.Errorf("grid is %dx%d", w, h)
	}
	a, err := npy.OpenNPZ(npzPath)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	arr, err := a.Read("arr_0")
	if err != nil {
		t.Fatal(err)
	}
	if arr.DType != dtype.U8 || len(arr.Shape) != 4 || arr.Shape[0] != 3 || arr.Shape[1] != side || arr.Shape[2] != side || arr.Shape[3] != 3 {
		t.Errorf("arr_0 is %v %v, want |u1 [3 %d %d 3]", arr.DType, arr.Shape, side, side)
	}
}

func TestDecodeErrors(t *testing.T) {
	d := ditTinyCase(t)
	sd := vaeFolder(t, "vae-sd-tiny")
	flux := vaeFolder(t, "vae-flux-tiny")
	dir := t.TempDir()
	latents, code, _, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--class", d.class(0), "--num", "2")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, stderr)
	}
	nanPath := filepath.Join(dir, "nan.safetensors")
	vals := make([]float32, 2*d.channels*d.size*d.size)
	vals[len(vals)-1] = float32(math.NaN())
	if err := safetensors.Write(nanPath, []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: d.shape(2), Data: dtype.F32Bytes(vals)}}, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no vae", []string{latents, "--out", dir}, 2, []string{"--vae is required"}},
		{"no output", []string{latents, "--vae", sd.dir}, 2, []string{"nothing to write"}},
		{"latent channels", []string{latents, "--vae", flux.dir, "--out", filepath.Join(dir, "x")}, 1, []string{"channels", "VAE decodes " + strconv.Itoa(flux.latentC)}},
		{"NaN latents", []string{nanPath, "--vae", sd.dir, "--out", filepath.Join(dir, "y")}, 1, []string{nanPath, "sample 1", "NaN"}},
		{"missing vae", []string{latents, "--vae", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "z")}, 1, []string{"none"}},
		{"not latents", []string{sd.dir + "/diffusion_pytorch_model.safetensors", "--vae", sd.dir, "--out", filepath.Join(dir, "w")}, 1, []string{`no tensor "latents"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"decode"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dcdit: ") {
				t.Errorf("stderr is not one 'dcdit: ' line: %q", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dir, "x"))
		if len(entries) > 0 {
			t.Errorf("a failed decode left %d files", len(entries))
		}
	}
}

// writeTestPNG writes a w×h picture with a gradient that depends on seed.
func writeTestPNG(t *testing.T, path string, w, h, seed int) {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x*7 + seed*40), uint8(y*5 + seed*13), uint8((x + y + seed) * 3), 255})
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
}

// A folder of PNGs in class folders encodes into a data set that training
// reads.
func TestDataEncodeTrains(t *testing.T) {
	v := vaeFolder(t, "vae-sd-tiny")
	dir := t.TempDir()
	imgs := filepath.Join(dir, "imgs")
	for i, rel := range []string{"cat/a.png", "cat/b.png", "dog/sub/c.png", "dog/d.png"} {
		writeTestPNG(t, filepath.Join(imgs, rel), 40+4*i, 36+3*i, i)
	}
	crop := 4 * v.scale // a latent grid of 4×4 cells
	data := filepath.Join(dir, "data.safetensors")
	code, stdout, stderr := run(t, "data", "encode", imgs, "--vae", v.dir, "--size", strconv.Itoa(crop), "--flip", "--out", data)
	if code != 0 {
		t.Fatalf("data encode: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "4 images") || !strings.Contains(stdout, "2 classes") {
		t.Errorf("stdout = %q", stdout)
	}
	set, err := datasets.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := []int{0, 0, 0, 0, 1, 1, 1, 1} // cat a, b; dog d, then sub/c (files before sub-folders)
	if set.N != 8 || set.C != v.latentC || set.H != 4 || set.W != 4 || !slices.Equal(set.Labels, wantLabels) || !slices.Equal(set.Classes, []string{"cat", "dog"}) {
		t.Fatalf("data set [%d %d %d %d] labels %v classes %v", set.N, set.C, set.H, set.W, set.Labels, set.Classes)
	}
	recipe := filepath.Join(dir, "r.toml")
	text := `name = "encoded"
[model]
depth = 1
hidden_size = 32
num_heads = 2
patch_size = 2
in_channels = ` + strconv.Itoa(v.latentC) + `
input_size = 4
num_classes = 2
[data]
source = "file"
path = "data.safetensors"
[[stage]]
kind = "train"
steps = 2
batch_size = 4
[save]
every = 0
`
	if err := os.WriteFile(recipe, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "train", recipe, "--out", filepath.Join(dir, "run"), "-q")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "model.safetensors")); err != nil {
		t.Fatal(err)
	}
}

func TestDataEncodeErrors(t *testing.T) {
	sd := vaeFolder(t, "vae-sd-tiny")
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeTestPNG(t, filepath.Join(good, "x.png"), 20, 20, 1)
	small := filepath.Join(dir, "small")
	writeTestPNG(t, filepath.Join(small, "x.png"), 8, 8, 1)
	broken := filepath.Join(dir, "broken")
	writeTestPNG(t, filepath.Join(broken, "x.png"), 20, 20, 1)
	raw, _ := os.ReadFile(filepath.Join(broken, "x.png"))
	if err := os.WriteFile(filepath.Join(broken, "x.png"), raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.safetensors")
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no vae", []string{good, "--out", out}, 2, []string{"--vae is required"}},
		{"bad layout", []string{good, "--vae", sd.dir, "--layout", "tree"}, 2, []string{"--layout"}},
		{"seed without sample", []string{good, "--vae", sd.dir, "--seed", "3"}, 2, []string{"--sample"}},
		{"truncated png", []string{broken, "--vae", sd.dir, "--size", "16", "--out", out}, 1, []string{"x.png"}},
		{"too small", []string{small, "--vae", sd.dir, "--size", "16", "--no-upscale", "--out", out}, 1, []string{"x.png", "smaller than the crop"}},
		{"no images", []string{filepath.Join(dir), "--vae", sd.dir, "--layout", "flat", "--out", out}, 1, []string{"no images"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"data", "encode"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q", stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed encode wrote %s", out)
			}
		})
	}
}

func TestInspectVAE(t *testing.T) {
	for _, kind := range []string{"vae-sd-tiny", "vae-flux-tiny"} {
		t.Run(kind, func(t *testing.T) {
			v := vaeFolder(t, kind)
			root, _ := fixtures.Root()
			cases, _ := fixtures.Discover(root, kind)
			for _, c := range []struct {
				path, layout string
				config       bool
			}{{v.dir, "diffusers", true}, {filepath.Join(cases[0].Dir, "weights-ldm.safetensors"), "original", false}} {
				code, stdout, stderr := run(t, "inspect", c.path, "--json")
				if code != 0 {
					t.Fatalf("inspect %s: exit %d: %s", c.path, code, stderr)
				}
				var r struct {
					Architecture, Layout string
					Config               *struct {
						LatentChannels int `json:"latent_channels"`
					}
					Missing, Unexpected []string
				}
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatal(err)
				}
				if r.Architecture != "vae" || r.Layout != c.layout || len(r.Missing)+len(r.Unexpected) != 0 {
					t.Errorf("%s: %+v", c.path, r)
				}
				if c.config && (r.Config == nil || r.Config.LatentChannels != v.latentC) {
					t.Errorf("%s: config %+v, want %d latent channels", c.path, r.Config, v.latentC)
				}
			}
		})
	}
}

// A diffusers VAE converts to the LDM naming tensor for tensor as the
// reference's own LDM file names it, and back.
func TestConvertVAE(t *testing.T) {
	for _, kind := range []string{"vae-sd-tiny", "vae-flux-tiny"} {
		t.Run(kind, func(t *testing.T) {
			v := vaeFolder(t, kind)
			root, _ := fixtures.Root()
			cases, _ := fixtures.Discover(root, kind)
			prefix, _ := cases[0].Config["ldm_prefix"].(string)
			dir := t.TempDir()
			ldm := filepath.Join(dir, "ldm.safetensors")
			if code, _, stderr := run(t, "convert", v.dir, ldm, "--layout", "original", "-q"); code != 0 {
				t.Fatalf("to original: exit %d: %s", code, stderr)
			}
			back := filepath.Join(dir, "back")
			if code, _, stderr := run(t, "convert", ldm, back, "--layout", "diffusers", "-q"); code != 0 {
				// Without config.json a folder needs an inferable config.
				if !strings.Contains(stderr, "config") {
					t.Errorf("to diffusers: %s", stderr)
				}
			}
			ref, err := safetensors.Open(filepath.Join(cases[0].Dir, "weights-ldm.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			got, err := safetensors.Open(ldm)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if len(got.Tensors()) != len(ref.Tensors()) {
				t.Fatalf("%d tensors, the reference's LDM file has %d", len(got.Tensors()), len(ref.Tensors()))
			}
			for _, rt := range ref.Tensors() {
				gt, ok := got.Tensor(strings.TrimPrefix(rt.Name, prefix))
				if !ok {
					t.Errorf("tensor %s missing", rt.Name)
					continue
				}
				rv, _ := ref.Tensor(rt.Name)
				a, _ := gt.Bytes()
				b, _ := rv.Bytes()
				if !slices.Equal(gt.Shape, rv.Shape) || string(a) != string(b) {
					t.Errorf("tensor %s: shape %v, want %v, or other values", rt.Name, gt.Shape, rv.Shape)
				}
			}
		})
	}
}

// inceptionWeights is the fid-inception fixture's 48 MB weights, which
// only the shared fixtures hold (not testdata/): the test skips, naming
// what to set, when DCDIT_FIXTURES does not lead to them.
func inceptionWeights(t *testing.T) string {
	t.Helper()
	root := os.Getenv(fixtures.EnvVar)
	if root == "" {
		t.Skipf("the FID Inception weights are not in testdata: set %s=../shared/fixtures to run this test", fixtures.EnvVar)
	}
	cases, err := fixtures.Discover(root, "fid-inception")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no fid-inception fixture under %s (%v)", root, err)
	}
	p := filepath.Join(cases[0].Dir, "weights.safetensors")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// FID between two folders equals FID between their .npz forms, and
// between a latents file decoded on the fly and a saved statistics file.
func TestFIDForms(t *testing.T) {
	weights := inceptionWeights(t)
	d := ditTinyCase(t)
	v := vaeFolder(t, "vae-sd-tiny")
	dir := t.TempDir()
	var lat [2]string
	for i, class := range []string{d.class(0), d.class(1)} {
		l, code, _, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--class", class, "--num", "5", "--seed", strconv.Itoa(i))
		if code != 0 {
			t.Fatalf("sample: %s", stderr)
		}
		lat[i] = l
		folder, npzPath := filepath.Join(dir, "f"+strconv.Itoa(i)), filepath.Join(dir, strconv.Itoa(i)+".npz")
		if code, _, stderr := run(t, "decode", l, "--vae", v.dir, "--out", folder, "--npz", npzPath, "-q"); code != 0 {
			t.Fatalf("decode: %s", stderr)
		}
	}
	fidOf := func(args ...string) float64 {
		t.Helper()
		code, stdout, stderr := run(t, append(append([]string{"fid"}, args...), "--inception", weights, "--json", "-q", "--batch", "3")...)
		if code != 0 {
			t.Fatalf("fid %v: exit %d: %s", args, code, stderr)
		}
		var r struct {
			FID float64 `json:"fid"`
			A   struct{ Samples int }
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r.FID
	}
	folders := fidOf(filepath.Join(dir, "f0"), filepath.Join(dir, "f1"))
	npzs := fidOf(filepath.Join(dir, "0.npz"), filepath.Join(dir, "1.npz"))
	if !(folders > 0) || folders != npzs {
		t.Errorf("FID between folders %v, between their .npz forms %v", folders, npzs)
	}
	stats := filepath.Join(dir, "ref.npz")
	if code, _, stderr := run(t, "fid", filepath.Join(dir, "f1"), "--save-stats", stats, "--inception", weights, "-q"); code != 0 {
		t.Fatalf("--save-stats: %s", stderr)
	}
	decoded := fidOf(lat[0], stats, "--vae", v.dir)
	if !(math.Abs(decoded-folders) <= 1e-9*folders) {
		t.Errorf("FID of latents decoded on the fly against saved statistics %v, between folders %v", decoded, folders)
	}
	if self := fidOf(filepath.Join(dir, "f0"), filepath.Join(dir, "0.npz")); !(math.Abs(self) < 1e-6) {
		t.Errorf("FID of a set against itself %v", self)
	}
}

func TestFIDErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.npz")
	if err := npy.WriteNPZ(bad, false, func(w *npy.Writer) error {
		return w.Add("arr_0", npy.FromFloat32([]int{2, 4, 4, 3}, make([]float32, 96)))
	}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.npz")
	if err := npy.WriteNPZ(other, false, func(w *npy.Writer) error {
		return w.Add("x", npy.FromFloat32([]int{2}, make([]float32, 2)))
	}); err != nil {
		t.Fatal(err)
	}
	lat := filepath.Join(dir, "l.safetensors")
	if err := safetensors.Write(lat, []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{1, 4, 2, 2}, Data: dtype.F32Bytes(make([]float32, 16))}}, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no inception", []string{dir, dir}, 2, []string{"--inception is required"}},
		{"one side", []string{dir, "--inception", "w"}, 2, []string{"--save-stats"}},
		{"three sides", []string{dir, dir, dir, "--inception", "w"}, 2, []string{"got 3"}},
		{"float samples", []string{bad, bad, "--inception", "w"}, 1, []string{bad, "arr_0", "uint8"}},
		{"unknown npz", []string{other, bad, "--inception", "w"}, 1, []string{other, "neither"}},
		{"latents without vae", []string{lat, bad, "--inception", "w"}, 1, []string{lat, "--vae"}},
		{"empty folder", []string{dir + "/none", bad, "--inception", "w"}, 1, []string{"none"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"fid"}, c.args...)...)
			if code != c.code || stdout != "" {
				t.Errorf("exit %d, want %d; stdout %q; stderr %q", code, c.code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

// eval with --vae, --inception and --ref scores every row by FID and
// writes each row's pictures as an ADM-readable sample batch.
func TestEvalFID(t *testing.T) {
	weights := inceptionWeights(t)
	v := vaeFolder(t, "vae-sd-tiny")
	if v.latentC != dcTinyCase(t).channels {
		t.Skipf("the VAE fixture has %d latent channels, the DC fixture %d", v.latentC, dcTinyCase(t).channels)
	}
	model := dctest.Checkpoint(t)
	teacher := randomTeacherFile(t)
	data := shapesFile(t, 8)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.npz")
	if code, _, stderr := run(t, "decode", data, "--vae", v.dir, "--npz", ref, "-q"); code != 0 {
		t.Fatalf("decode: %s", stderr)
	}
	out := filepath.Join(dir, "eval")
	code, stdout, stderr := run(t, "eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data, "--out", out,
		"--rho", "0,0.5", "--lite", "0,0.8", "--lite-cfg", "2", "--num", "2", "--samples", "3", "--steps", "2", "--probe-t", "",
		"--vae", v.dir, "--inception", weights, "--ref", ref, "-q")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "FID") {
		t.Errorf("table lacks FID:\n%s", stdout)
	}
	raw, err := os.ReadFile(filepath.Join(out, eval.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			FID *float64 `json:"fid"`
			IS  *float64 `json:"inception_score"`
		} `json:"rows"`
		Teacher struct {
			FID *float64 `json:"fid"`
		} `json:"teacher"`
		Lite struct {
			FID *float64 `json:"fid"`
		} `json:"lite_cfg"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Teacher.FID == nil || !(*rep.Teacher.FID >= 0) || rep.Lite.FID == nil || len(rep.Rows) != 2 {
		t.Fatalf("eval.json: %s", raw)
	}
	for _, r := range rep.Rows {
		if r.FID == nil || !(*r.FID >= 0) || r.IS == nil || !(*r.IS >= 1) {
			t.Errorf("row without FID or IS: %s", raw)
		}
	}
	batches, _ := filepath.Glob(filepath.Join(out, "samples", "*.npz"))
	if len(batches) != 5 { // teacher at the rows' and the Lite-CFG scale, 2 rows, Lite-CFG
		t.Errorf("sample batches %v, want 5", batches)
	}
	side := v.scale * dcTinyCase(t).size
	if w, h := pngSize(t, filepath.Join(out, eval.GridFile)); w < 3*side || h < 4*side {
		t.Errorf("elastic grid %dx%d is not drawn with %d-pixel decoded tiles", w, h, side)
	}
}

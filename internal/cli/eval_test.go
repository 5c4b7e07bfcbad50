package cli

import (
	"encoding/binary"
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/posembed"
)

// dcTiny is what the eval tests need to know of the first dcdit-tiny
// fixture case (the model dctest.Checkpoint saves), read from its
// config.json: no size or count of a particular case is written into the
// tests, since other fixture sets of the same format run too.
type dcTiny struct {
	size, channels, classes int
	heads                   string // the main network's, for --num-heads
}

func dcTinyCase(t *testing.T) dcTiny {
	t.Helper()
	c := dctest.Cases(t)[0]
	get := func(key string) int { return c.PositiveInt(t, key) }
	d := dcTiny{size: get("input_size"), channels: get("in_channels"), classes: get("num_classes")}
	if rows, cols := get("num_rows"), get("num_cols"); rows != d.size || cols != d.size {
		t.Fatalf("%s: a %d×%d grid; the eval tests need square latents of side input_size %d", c.Dir, rows, cols, d.size)
	}
	hc, _ := c.Config["hnet"].(map[string]any)
	heads, _ := hc["num_heads"].([]any)
	h, ok := 0.0, len(heads) > 0
	if ok {
		h, ok = heads[len(heads)-1].(float64)
	}
	if !ok || !(h > 0) {
		t.Fatalf("%s: config.json lacks hnet.num_heads", c.Dir)
	}
	d.heads = strconv.Itoa(int(h))
	// The data comes from the shapes generator, whose latents have a fixed
	// channel count and whose labels cover its classes.
	if d.channels != shapes.Channels || d.classes < len(shapes.Classes) {
		t.Fatalf("%s: %d latent channels and %d classes; the shapes data has %d channels and %d classes",
			c.Dir, d.channels, d.classes, shapes.Channels, len(shapes.Classes))
	}
	return d
}

// teacherHeads is the random teacher's head count: the file does not
// store it, so every eval passes --teacher-heads.
const teacherHeads = "4"

// randomTeacherFile writes a random DiT matching the dcdit-tiny fixture's
// latents and classes (learned sigma; a width and head count of its own)
// in the original naming, with its adaLN-Zero layers randomised so that it
// predicts something.
func randomTeacherFile(t *testing.T) string {
	t.Helper()
	d := dcTinyCase(t)
	heads, _ := strconv.Atoi(teacherHeads)
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: heads, PatchSize: 2, InChannels: d.channels, InputSize: d.size,
		LearnSigma: true, NumClasses: d.classes, MLPRatio: 2, FrequencySize: 256}
	m, err := dit.Init(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 5))
	exp := arch.ExpectedDiT(cfg, arch.Original)
	var ts []safetensors.WriteTensor
	for i, name := range exp.Names() {
		var v []float32
		if name == "pos_embed" {
			g := cfg.InputSize / cfg.PatchSize
			v = make([]float32, g*g*cfg.HiddenSize)
			posembed.SinCosGrid(v, g, cfg.HiddenSize)
		} else {
			v = m.Params.Get(name).Values()
			if strings.Contains(name, "adaLN_modulation") || strings.HasPrefix(name, "final_layer.linear") {
				for k := range v {
					v[k] = float32(0.05 * rng.NormFloat64())
				}
			}
		}
		data := make([]byte, 4*len(v))
		for k, x := range v {
			binary.LittleEndian.PutUint32(data[4*k:], math.Float32bits(x))
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: exp.Shape(i), Data: data})
	}
	path := filepath.Join(t.TempDir(), "teacher.safetensors")
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func shapesFile(t *testing.T, n int) string {
	t.Helper()
	g, err := shapes.New(dcTinyCase(t).size, 9)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.Set(n)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shapes.safetensors")
	if err := datasets.Write(path, s); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEval(t *testing.T) {
	model := dctest.Checkpoint(t)
	teacher := randomTeacherFile(t)
	data := shapesFile(t, 8)
	out := filepath.Join(t.TempDir(), "eval", "run")
	small := []string{"--num", "4", "--samples", "2", "--steps", "2", "--seed", "1"}

	args := append([]string{"eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data, "--out", out, "--rho", "0,0.5", "--lite", "0,0.8", "--lite-cfg", "2"}, small...)
	code, stdout, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{"kept tokens", "teacher", "Lite-CFG (scale 2, ρ cond 0 / uncond 0.8)", "edge density ratio", "wrote " + filepath.Join(out, eval.JSONFile)} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, eval.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Rho        float64 `json:"rho"`
			KeptTokens float64 `json:"kept_tokens"`
			GFLOPs     float64 `json:"gflops_per_image"`
		} `json:"rows"`
		Lite  *struct{} `json:"lite_cfg"`
		Ratio *float64  `json:"edge_density_ratio"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Lite == nil || rep.Ratio == nil || !(rep.Rows[1].KeptTokens < rep.Rows[0].KeptTokens) || !(rep.Rows[1].GFLOPs < rep.Rows[0].GFLOPs) {
		t.Errorf("eval.json: %s", raw)
	}
	for _, name := range []string{eval.BoundaryFile, eval.TrajectoryFile, eval.GridFile} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.DecodeConfig(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		f.Close()
	}
	if dir := os.Getenv("DCDIT_EVAL_PICTURES"); dir != "" {
		for _, name := range []string{eval.BoundaryFile, eval.TrajectoryFile, eval.GridFile} {
			b, _ := os.ReadFile(filepath.Join(out, name))
			os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}

	// --json prints the same object as eval.json, timings aside.
	args = append([]string{"eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data, "--rho", "0,0.5", "--lite", "0,0.8", "--lite-cfg", "2", "--json", "-q"}, small...)
	code, stdout, stderr = run(t, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("--json: exit %d, stderr %q", code, stderr)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(stdout), &a); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	json.Unmarshal(raw, &b)
	strip := func(m map[string]any) {
		delete(m, "teacher")
		delete(m, "lite_cfg")
		for _, r := range m["rows"].([]any) {
			delete(r.(map[string]any), "ms_per_image")
		}
	}
	strip(a)
	strip(b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("--json differs from eval.json:\n%s\n%s", ja, jb)
	}
}

func TestEvalErrors(t *testing.T) {
	model := dctest.Checkpoint(t)
	teacher := randomTeacherFile(t)
	data := shapesFile(t, 4)
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	notFolder := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notFolder, []byte("x"), 0o644)
	base := func(extra ...string) []string {
		return append([]string{"eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data, "--num", "2", "--samples", "1", "--steps", "1", "--no-lite"}, extra...)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no teacher", []string{"eval", model, "--data", data}, exitUsage, "--teacher"},
		{"no data", []string{"eval", model, "--teacher", teacher}, exitUsage, "--data"},
		{"rho", base("--rho", "0,1"), exitUsage, "ρ = 1"},
		{"lite pair", []string{"eval", model, "--teacher", teacher, "--data", data, "--lite", "0.5"}, exitUsage, "--lite [0.5]: want two fractions"},
		{"lite cfg", []string{"eval", model, "--teacher", teacher, "--data", data, "--lite-cfg", "1"}, exitUsage, "--lite-cfg 1"},
		{"cfg", []string{"eval", model, "--teacher", teacher, "--data", data, "--cfg", "NaN"}, exitUsage, "--cfg NaN"},
		{"steps", base("--steps", "0"), exitUsage, "--steps 0"},
		{"two args", []string{"eval", model, model, "--teacher", teacher, "--data", data}, exitUsage, "takes 1 argument"},
		{"teacher is DC", []string{"eval", model, "--teacher", model, "--data", data, "--no-lite"}, exitError, "--teacher"},
		{"model is DiT", []string{"eval", teacher, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data}, exitUsage, "is a fixed-patch model, scored on its own"},
		{"reference without heads", []string{"eval", ref, "--teacher", teacher, "--data", data}, exitError, "pass --num-heads"},
		{"data is a model", []string{"eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", teacher}, exitError, `no tensor "latents"`},
		{"out is a file", base("--out", notFolder), exitError, "is a file, want a folder"},
		{"missing model", base()[:1], exitUsage, "takes 1 argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := run(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, c.code, c.want)
			}
		})
	}

	// A reference state_dict with --num-heads evaluates.
	code, stdout, stderr := run(t, "eval", ref, "--num-heads", dcTinyCase(t).heads, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data,
		"--num", "2", "--samples", "1", "--steps", "1", "--no-lite", "--rho", "0", "--json")
	if code != 0 {
		t.Fatalf("reference state_dict: exit %d: %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep["rows"].([]any)) != 1 {
		t.Errorf("reference state_dict: %v\n%s", err, stdout)
	}
	keys := make([]string, 0, len(rep))
	for k := range rep {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t.Logf("top-level keys %v", keys)
}

// A DiT is scored on its own, without --teacher: the numbers a DC
// evaluation on the same data, seed, steps and guidance prints for it as
// its teacher; flags that measure a DC model are refused.
func TestEvalOwnDiT(t *testing.T) {
	teacher := randomTeacherFile(t)
	g, err := shapes.New(dcTinyCase(t).size, 9)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.BalancedSet(2 * len(shapes.Classes))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "balanced.safetensors")
	if err := datasets.Write(data, s); err != nil {
		t.Fatal(err)
	}
	features := filepath.Join("..", "..", "testdata", "featnet", "model.safetensors")
	common := []string{"--teacher-heads", teacherHeads, "--data", data, "--features", features, "--samples", "4", "--steps", "2", "--cfg", "2", "--seed", "3", "--json", "-q"}
	code, out, errOut := run(t, append([]string{"eval", teacher}, common...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var own struct {
		FD              *float64 `json:"fd"`
		ClassAccuracy   *float64 `json:"class_accuracy"`
		PromptFollowing *float64 `json:"prompt_following"`
		GFLOPs          float64  `json:"gflops_per_image"`
		Process         string   `json:"process"`
		Floor           *float64 `json:"data_fd_floor"`
	}
	if err := json.Unmarshal([]byte(out), &own); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if own.FD == nil || !(*own.FD >= 0) || own.ClassAccuracy == nil || own.PromptFollowing != nil || !(own.GFLOPs > 0) || own.Process != "ddpm" || own.Floor == nil {
		t.Fatalf("report %s", out)
	}
	code, out, errOut = run(t, append([]string{"eval", dctest.Checkpoint(t), "--teacher", teacher, "--rho", "0", "--no-lite", "--num", "4", "--random-router=false"}, common...)...)
	if code != 0 {
		t.Fatalf("DC eval: exit %d: %s", code, errOut)
	}
	var dc struct {
		Teacher struct {
			FD            *float64 `json:"fd"`
			ClassAccuracy *float64 `json:"class_accuracy"`
			GFLOPs        float64  `json:"gflops_per_image"`
		} `json:"teacher"`
	}
	if err := json.Unmarshal([]byte(out), &dc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if dc.Teacher.FD == nil || *dc.Teacher.FD != *own.FD || *dc.Teacher.ClassAccuracy != *own.ClassAccuracy || dc.Teacher.GFLOPs != own.GFLOPs {
		t.Errorf("on its own FD %v, accuracy %v, %v GFLOPs; as the DC eval's teacher %v, %v, %v", *own.FD, *own.ClassAccuracy, own.GFLOPs,
			dc.Teacher.FD, dc.Teacher.ClassAccuracy, dc.Teacher.GFLOPs)
	}
	for _, c := range []struct {
		flag []string
		want string
	}{
		{[]string{"--rho", "0.5"}, "--rho measures a DC model"},
		{[]string{"--teacache", "1"}, "dcdit sample --teacache"},
		{[]string{"--features", ""}, "--features: want the feature network"},
	} {
		code, _, errOut := run(t, append(append([]string{"eval", teacher}, common...), c.flag...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.flag, code, errOut, c.want)
		}
	}
}

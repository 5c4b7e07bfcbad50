package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
)

func TestDataShapes(t *testing.T) {
	dir := t.TempDir()
	out, pic := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "a.png")
	code, stdout, stderr := run(t, "data", "shapes", "--num", "24", "--size", "12", "--seed", "5", "--out", out, "--png", pic)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "latents [24 4 12 12]") || !strings.Contains(stdout, shapes.Version) {
		t.Errorf("summary %q", stdout)
	}
	s, err := datasets.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 24 || s.H != 12 || s.NumClasses != len(shapes.Classes) || s.Edges == nil || s.Metadata["dcdit.seed"] != "5" {
		t.Errorf("read back %d samples of %d×%d, %d classes, edges %v, metadata %v", s.N, s.H, s.W, s.NumClasses, s.Edges != nil, s.Metadata)
	}
	g, _ := shapes.New(12, 5)
	if want := g.Sample(23); want.Label != s.Labels[23] || want.Latent[7] != s.Latent(23)[7] {
		t.Error("file differs from the generator's sample 23")
	}
	f, err := os.Open(pic)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 10*12*8 || cfg.Height != 3*12*8 {
		t.Errorf("png %dx%d (%v), want %dx%d", cfg.Width, cfg.Height, err, 10*12*8, 3*12*8)
	}

	// The same seed gives the same file.
	again := filepath.Join(dir, "b.safetensors")
	if code, _, stderr := run(t, "data", "shapes", "--num", "24", "--size", "12", "--seed", "5", "--out", again, "-q"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two runs with one seed wrote different files")
	}
	if s.Captions != nil {
		t.Error("captions without --captions")
	}

	// --captions adds the generator's captions.
	capt := filepath.Join(dir, "c.safetensors")
	if code, _, stderr := run(t, "data", "shapes", "--num", "24", "--size", "12", "--seed", "5", "--captions", "--out", capt, "-q"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	c, err := datasets.Read(capt)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := g.CaptionedSet(24)
	if len(c.Captions) != 24 || len(c.Vocabulary) != len(shapes.Vocabulary) || fmt.Sprint(c.Captions) != fmt.Sprint(want.Captions) {
		t.Errorf("captions %v over %d words, want the generator's", c.Captions, len(c.Vocabulary))
	}

	// --balanced draws the class-balanced sets a recipe's evaluation uses.
	for _, captions := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("b%v.safetensors", captions))
		args := []string{"data", "shapes", "--num", "24", "--size", "12", "--seed", "5", "--balanced", "--out", path, "-q"}
		want, _ := g.BalancedSet(24)
		if captions {
			args = append(args, "--captions")
			want, _ = g.BalancedCaptionedSet(24)
		}
		if code, _, stderr := run(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := datasets.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.Labels, want.Labels) || !slices.Equal(b.Latents, want.Latents) || fmt.Sprint(b.Captions) != fmt.Sprint(want.Captions) {
			t.Errorf("--balanced (captions %v): labels %v, want the generator's balanced set %v", captions, b.Labels, want.Labels)
		}
	}
}

func TestDataShapesErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--num", "0"}, exitUsage, "--num 0"},
		{[]string{"--size", "4"}, exitUsage, "--size 4: want 8..4096"},
		{[]string{"--out", filepath.Join(dir, "x.st"), "--png", filepath.Join(dir, "x.st")}, exitUsage, "both name"},
		{[]string{"--out", filepath.Join(dir, "no", "x.st")}, exitError, "does not exist"},
		{[]string{"--out", dir}, exitError, "is a folder"},
		{[]string{"extra"}, exitUsage, "takes 0 argument"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, append([]string{"data", "shapes"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if code, _, stderr := run(t, "data", "mnist"); code != exitUsage || !strings.Contains(stderr, `unknown data command "mnist"`) {
		t.Errorf("data mnist: exit %d, %q", code, stderr)
	}
}

func TestDataBound(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "s.safetensors")
	if code, _, stderr := run(t, "data", "shapes", "--num", "20", "--size", "16", "--out", data, "-q"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, stdout, stderr := run(t, "data", "bound", data, "--patch", "1,2", "--keep", "100%,50%,10", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Patch, Cells, Kept int
		RelMSE             float64 `json:"rel_mse"`
		RelVelocity        float64 `json:"rel_velocity_mse"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	want := []struct{ patch, cells, kept int }{{1, 256, 256}, {1, 256, 128}, {1, 256, 10}, {2, 64, 64}, {2, 64, 32}, {2, 64, 10}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %s", len(rows), len(want), stdout)
	}
	for i, w := range want {
		r := rows[i]
		if r.Patch != w.patch || r.Cells != w.cells || r.Kept != w.kept {
			t.Errorf("row %d: patch %d, %d of %d cells; want %d, %d of %d", i, r.Patch, r.Kept, r.Cells, w.patch, w.kept, w.cells)
		}
		// Every cell kept loses nothing; fewer kept cells lose more, and
		// the velocity's norm (unit noise added) is the larger one.
		if w.kept == w.cells && r.RelMSE != 0 {
			t.Errorf("row %d: every cell kept, error %v", i, r.RelMSE)
		}
		if i > 0 && rows[i-1].Patch == r.Patch && !(r.RelMSE >= rows[i-1].RelMSE) {
			t.Errorf("row %d: error %v below the previous row's %v with fewer cells", i, r.RelMSE, rows[i-1].RelMSE)
		}
		if !(r.RelVelocity <= r.RelMSE) {
			t.Errorf("row %d: relative velocity error %v above the relative error %v", i, r.RelVelocity, r.RelMSE)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{data, "--keep", "0%"}, exitUsage, "want a percentage"},
		{[]string{data, "--keep", "x"}, exitUsage, "want a percentage or a count"},
		{[]string{data, "--patch", "0"}, exitUsage, "--patch 0"},
		{[]string{data, "--patch", "3"}, exitError, "cells of 3×3 do not tile"},
		{[]string{data, "--patch", "2", "--keep", "65"}, exitError, "keep 65 of 64 cells"},
	} {
		code, _, stderr := run(t, append([]string{"data", "bound"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestDataBoundTeacher(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "s.safetensors")
	if code, _, stderr := run(t, "data", "shapes", "--num", "4", "--captions", "--out", data, "-q"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	zimage := filepath.Join("..", "..", "testdata", "zimage-teacher", "model")
	dit := filepath.Join("..", "..", "testdata", "teacher", "model.safetensors")
	type row struct {
		Level       *float64
		Patch, Kept int
		RelMSE      float64  `json:"rel_mse"`
		RelVelocity *float64 `json:"rel_velocity_mse"`
	}
	for _, c := range []struct {
		args     []string
		velocity bool
	}{
		{[]string{"--teacher", zimage, "--sigma", "0.9", "--cfg", "4"}, true},
		{[]string{"--teacher", dit, "--timestep", "700"}, false},
	} {
		args := append([]string{"data", "bound", data, "--patch", "2", "--keep", "100%,25%", "--json"}, c.args...)
		code, stdout, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		var rows []row
		if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 2 {
			t.Fatalf("%v: %d rows (%v): %s", c.args, len(rows), err, stdout)
		}
		for i, r := range rows {
			if r.Level == nil || (r.RelVelocity != nil) != c.velocity {
				t.Errorf("%v row %d: level %v, velocity error %v; want a level and a velocity error %v", c.args, i, r.Level, r.RelVelocity, c.velocity)
			}
		}
		if rows[0].RelMSE != 0 || !(rows[1].RelMSE > 0 && rows[1].RelMSE < 10) {
			t.Errorf("%v: errors %v and %v, want 0 with every cell kept and a finite positive one at 25%%", c.args, rows[0].RelMSE, rows[1].RelMSE)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sigma", "0.9"}, "noise levels of a --teacher"},
		{[]string{"--teacher", zimage}, "want noise levels"},
		{[]string{"--teacher", zimage, "--sigma", "1.5"}, "--sigma 1.5"},
		{[]string{"--teacher", dit, "--sigma", "0.9"}, "ddpm teacher"},
		{[]string{"--teacher", dit, "--timestep", "1000"}, "timestep 1000"},
	} {
		code, _, stderr := run(t, append([]string{"data", "bound", data}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", c.args, code, stderr, c.want)
		}
	}
}

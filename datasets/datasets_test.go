package datasets

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

func tinySet() *Set {
	s := &Set{N: 3, C: 2, H: 2, W: 3, NumClasses: 4, Classes: []string{"a", "b", "c", "d"},
		Labels: []int{0, 3, 1}, Metadata: map[string]string{"dcdit.seed": "9"}}
	for i := range s.N * s.C * s.H * s.W {
		s.Latents = append(s.Latents, float32(i)/7-1)
	}
	for i := range s.N * s.H * s.W {
		s.Edges = append(s.Edges, i%3 == 0)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	for _, edges := range []bool{true, false} {
		s := tinySet()
		if !edges {
			s.Edges = nil
		}
		path := filepath.Join(t.TempDir(), "d.safetensors")
		if err := Write(path, s); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.N != s.N || got.C != s.C || got.H != s.H || got.W != s.W || got.NumClasses != s.NumClasses {
			t.Fatalf("sizes %+v, want %+v", got, s)
		}
		for i := range s.Latents {
			if got.Latents[i] != s.Latents[i] {
				t.Fatalf("latent %d = %v, want %v", i, got.Latents[i], s.Latents[i])
			}
		}
		for i := range s.Labels {
			if got.Labels[i] != s.Labels[i] {
				t.Fatalf("label %d = %d, want %d", i, got.Labels[i], s.Labels[i])
			}
		}
		if (got.Edges != nil) != edges {
			t.Fatalf("edges present = %v, want %v", got.Edges != nil, edges)
		}
		for i := range s.Edges {
			if got.Edges[i] != s.Edges[i] {
				t.Fatalf("edge %d = %v, want %v", i, got.Edges[i], s.Edges[i])
			}
		}
		if strings.Join(got.Classes, ",") != "a,b,c,d" || got.Metadata["dcdit.seed"] != "9" {
			t.Errorf("classes %v, metadata %v", got.Classes, got.Metadata)
		}
		x, y, err := got.Batch(nil, nil, []int{2, 0})
		if err != nil || y[0] != 1 || y[1] != 0 || x[0] != s.Latent(2)[0] {
			t.Errorf("Batch: %v %v %v", x, y, err)
		}
		if _, _, err := got.Batch(nil, nil, []int{3}); err == nil {
			t.Error("Batch accepted index 3 of 3 samples")
		}
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Set)
		want string
	}{
		{"short latents", func(s *Set) { s.Latents = s.Latents[1:] }, "latent values"},
		{"labels", func(s *Set) { s.Labels = s.Labels[:2] }, "2 labels for 3 samples"},
		{"label range", func(s *Set) { s.Labels[1] = 4 }, "label 4 of sample 1 outside [0, 4)"},
		{"edges", func(s *Set) { s.Edges = s.Edges[:3] }, "edge-mask values"},
		{"class names", func(s *Set) { s.Classes = s.Classes[:2] }, "2 class names for 4 classes"},
		{"comma", func(s *Set) { s.Classes[0] = "a,b" }, "without commas"},
		{"nan", func(s *Set) { s.Latents[5] = float32(math.NaN()) }, "latent value NaN in sample 0 (index 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := tinySet()
			c.edit(s)
			path := filepath.Join(t.TempDir(), "d.safetensors")
			err := Write(path, s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed write left %s", path)
			}
		})
	}
}

func f32(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i64(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func TestReadErrors(t *testing.T) {
	lat := safetensors.WriteTensor{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, 2, 3)}
	lab := safetensors.WriteTensor{Name: "labels", DType: dtype.I64, Shape: []int64{2}, Data: i64(0, 1)}
	cases := []struct {
		name    string
		tensors []safetensors.WriteTensor
		meta    map[string]string
		want    string
		notSet  bool
	}{
		{"no latents", []safetensors.WriteTensor{lab}, nil, `no tensor "latents"`, true},
		{"no labels", []safetensors.WriteTensor{lat}, nil, `no tensor "labels"`, true},
		{"latents rank", []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{2, 2}, Data: f32(0, 1, 2, 3)}, lab}, nil,
			`tensor "latents" is F32 [2 2], want a float tensor [N, C, H, W]`, false},
		{"latents ints", []safetensors.WriteTensor{{Name: "latents", DType: dtype.I64, Shape: []int64{1, 1, 1, 1}, Data: i64(1)}, lab}, nil,
			`want a float tensor`, false},
		{"labels length", []safetensors.WriteTensor{lat, {Name: "labels", DType: dtype.I64, Shape: []int64{3}, Data: i64(0, 1, 2)}}, nil,
			`tensor "labels" is I64 [3], want integers [2]`, false},
		{"float labels", []safetensors.WriteTensor{lat, {Name: "labels", DType: dtype.F32, Shape: []int64{2}, Data: f32(0, 1)}}, nil,
			`tensor "labels" is F32 [2], want integers [2]`, false},
		{"negative label", []safetensors.WriteTensor{lat, {Name: "labels", DType: dtype.I64, Shape: []int64{2}, Data: i64(0, -1)}}, nil,
			`label -1 of sample 1`, false},
		{"edges shape", []safetensors.WriteTensor{lat, lab, {Name: "edges", DType: dtype.U8, Shape: []int64{2, 2}, Data: []byte{0, 1, 0, 1}}}, nil,
			`tensor "edges" is U8 [2 2], want integers or BOOL [2 1 2]`, false},
		{"num classes", []safetensors.WriteTensor{lat, lab}, map[string]string{"dcdit.num_classes": "x"}, `dcdit.num_classes = "x"`, false},
		{"label vs classes", []safetensors.WriteTensor{lat, lab}, map[string]string{"dcdit.num_classes": "1"}, `label 1 outside [0, 1)`, false},
		{"names vs count", []safetensors.WriteTensor{lat, lab}, map[string]string{"dcdit.num_classes": "3", "dcdit.classes": "a,b"}, `names 2 classes`, false},
		{"nan", []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, float32(math.Inf(1)), 3)}, lab}, nil,
			`latent value +Inf in sample 1 (index 0: channel 0, row 0, column 0)`, false},
		{"nan value", []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, float32(math.NaN()), 2, 3)}, lab}, nil,
			`latent value NaN in sample 0 (index 1: channel 0, row 0, column 1)`, false},
		{"finite outlier", []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, 2, 1e30)}, lab}, nil,
			`latent value 1e+30 in sample 1 (index 1: channel 0, row 0, column 1): want a finite value within ±10000`, false},
		{"negative outlier", []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(-20000, 1, 2, 3)}, lab}, nil,
			`latent value -20000 in sample 0`, false},
		{"num classes huge", []safetensors.WriteTensor{lat, lab}, map[string]string{"dcdit.num_classes": "1000000000000"}, `dcdit.num_classes = "1000000000000", want an integer 1 … 16777216`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := safetensors.Write(path, c.tensors, c.meta); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, path, c.want)
			}
			if errors.Is(err, ErrNotDataSet) != c.notSet {
				t.Errorf("errors.Is(err, ErrNotDataSet) = %v, want %v", !c.notSet, c.notSet)
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.safetensors")); err == nil {
		t.Error("Read accepted a missing file")
	}
}

// TestReadInfersClasses: without metadata the class count is the largest
// label plus one; BOOL edges are accepted.
func TestReadInfersClasses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.safetensors")
	err := safetensors.Write(path, []safetensors.WriteTensor{
		{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, 2, 3)},
		{Name: "labels", DType: dtype.I64, Shape: []int64{2}, Data: i64(4, 1)},
		{Name: "edges", DType: dtype.BOOL, Shape: []int64{2, 1, 2}, Data: []byte{1, 0, 0, 1}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumClasses != 5 || s.Classes != nil || !s.Edges[0] || s.Edges[1] || !s.Edges[3] {
		t.Errorf("classes %d %v, edges %v", s.NumClasses, s.Classes, s.Edges)
	}
	if lo, hi := s.Range(); lo != 0 || hi != 3 {
		t.Errorf("Range = %v, %v, want 0, 3", lo, hi)
	}
}

func TestDeriveEdges(t *testing.T) {
	// One sample, 1 channel, 3×4: a step between columns 1 and 2 of 1.0,
	// noise of 0.1 elsewhere.
	s := &Set{N: 1, C: 1, H: 3, W: 4, NumClasses: 1, Labels: []int{0}, Latents: []float32{
		0, 0.1, 1, 1,
		0, 0, 1.1, 1,
		0.1, 0, 1, 1,
	}}
	cases := []struct {
		threshold float64
		want      string
	}{
		{0.5, ".##. .##. .##."},
		{0.05, "###. #### ###."},
		{2, ".... .... ...."},
	}
	for _, c := range cases {
		got := s.DeriveEdges(c.threshold)
		var b strings.Builder
		for i, e := range got {
			if i > 0 && i%4 == 0 {
				b.WriteByte(' ')
			}
			if e {
				b.WriteByte('#')
			} else {
				b.WriteByte('.')
			}
		}
		if b.String() != c.want {
			t.Errorf("threshold %v: %s, want %s", c.threshold, b.String(), c.want)
		}
	}
}

// ReadKeys reads latents and labels stored under other names; Read, which
// looks for "latents", says the file holds no data set.
func TestReadKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.safetensors")
	err := safetensors.Write(path, []safetensors.WriteTensor{
		{Name: "z", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, 2, 3)},
		{Name: "class_ids", DType: dtype.I64, Shape: []int64{2}, Data: i64(1, 0)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadKeys(path, "z", "class_ids")
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 2 || s.Labels[0] != 1 || s.Latents[3] != 3 {
		t.Errorf("read %d samples, labels %v, latents %v", s.N, s.Labels, s.Latents)
	}
	if _, err := Read(path); !errors.Is(err, ErrNotDataSet) || !strings.Contains(err.Error(), `"latents"`) {
		t.Errorf("Read: %v", err)
	}
	if _, err := ReadKeys(path, "z", "labels"); err == nil || !strings.Contains(err.Error(), `no tensor "labels"`) {
		t.Errorf("ReadKeys with a missing labels key: %v", err)
	}
}

// A `dcdit sample` output (latents, labels in the metadata) reads as a
// data set; a label list of the wrong length is an error.
func TestReadSampleOutput(t *testing.T) {
	for _, tt := range []struct {
		labels, want string
	}{
		{"3,0", ""},
		{"3", "holds 1 labels for 2 latents"},
		{"3,x", `entry 1 is "x"`},
	} {
		path := filepath.Join(t.TempDir(), "samples.safetensors")
		err := safetensors.Write(path, []safetensors.WriteTensor{
			{Name: "latents", DType: dtype.F32, Shape: []int64{2, 1, 1, 2}, Data: f32(0, 1, 2, 3)},
		}, map[string]string{MetaLabels: tt.labels})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Read(path)
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("labels %q: err = %v, want %q", tt.labels, err, tt.want)
			}
			continue
		}
		if err != nil || s.Labels[0] != 3 || s.Labels[1] != 0 || s.NumClasses != 4 {
			t.Errorf("labels %q: %v, %+v", tt.labels, err, s)
		}
	}
}

// Captions are checked on write and on read: every sample captioned with
// indices into the vocabulary, padding only at the end, a vocabulary
// present.
func TestCaptionsChecked(t *testing.T) {
	base := func() *Set {
		return &Set{N: 2, C: 1, H: 1, W: 1, Latents: []float32{0, 1}, Labels: []int{0, 1}, NumClasses: 2,
			Captions: [][]int{{0, 1}, {1}}, Vocabulary: []string{"a", "b"}}
	}
	for _, tt := range []struct {
		name string
		edit func(*Set)
		want string
	}{
		{"token outside", func(s *Set) { s.Captions[1] = []int{2} }, "index 2 outside the vocabulary of 2 words"},
		{"empty caption", func(s *Set) { s.Captions[0] = nil }, "caption of sample 0 is empty"},
		{"one caption short", func(s *Set) { s.Captions = s.Captions[:1] }, "1 captions for 2 samples"},
		{"vocabulary alone", func(s *Set) { s.Captions = nil }, "a vocabulary without captions"},
		{"comma in a word", func(s *Set) { s.Vocabulary[0] = "a,b" }, `"a,b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(s)
			if err := Write(filepath.Join(t.TempDir(), "d.safetensors"), s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	// On read: a token after the padding, and captions without a vocabulary.
	dir := t.TempDir()
	lat := dtype.F32Bytes([]float32{0, 1})
	lab := make([]byte, 16)
	lab[8] = 1
	caps := func(toks ...int64) []byte {
		b := make([]byte, 8*len(toks))
		for i, v := range toks {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
		return b
	}
	for _, tt := range []struct {
		name string
		toks []byte
		md   map[string]string
		want string
	}{
		{"token after padding", caps(0, -1, 1, 1, -1, 0), map[string]string{MetaVocabulary: "a,b"}, "index 1 at position 2 follows the −1 padding"},
		{"no vocabulary", caps(0, 1, 1, 1, -1, -1), map[string]string{}, "without metadata dcdit.vocabulary"},
	} {
		path := filepath.Join(dir, tt.name+".safetensors")
		ts := []safetensors.WriteTensor{
			{Name: LatentsKey, DType: dtype.F32, Shape: []int64{2, 1, 1, 1}, Data: lat},
			{Name: LabelsKey, DType: dtype.I64, Shape: []int64{2}, Data: lab},
			{Name: CaptionsKey, DType: dtype.I64, Shape: []int64{2, 3}, Data: tt.toks},
		}
		if err := safetensors.Write(path, ts, tt.md); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want %q and the file named", tt.name, err, tt.want)
		}
	}
}

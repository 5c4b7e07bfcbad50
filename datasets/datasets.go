// Package datasets holds training and evaluation data sets of latents with
// class labels, and their file format: one safetensors file with
//
//	latents  [N, C, H, W]  float (written F32)
//	labels   [N]           integer (written I64), 0 ≤ label < NumClasses
//	edges    [N, H, W]     optional U8: 1 where a grid cell lies on a region
//	                       boundary (its 4-neighbourhood holds another region)
//	captions [N, T]        optional I64: each sample's caption as indices
//	                       into dcdit.vocabulary, padded with −1
//	caption_feats [N, L, D] optional F32: each sample's caption as a text
//	                       encoder's features, zero-padded to L rows
//	caption_lens [N]       I64 with caption_feats: each caption's rows, 1 … L
//	empty_caption_feats [E, D] optional F32 with caption_feats: the empty
//	                       prompt's features, a dropped caption's
//
// and metadata: dcdit.dataset (the generator, e.g. "shapes/v1"),
// dcdit.num_classes, dcdit.classes (comma-separated names), with captions
// dcdit.vocabulary (comma-separated words), plus whatever the generator
// records (seed, size). Files are written atomically.
//
// Generators live in subpackages (datasets/shapes).
package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Tensor and metadata names of the file format.
const (
	LatentsKey = "latents"
	LabelsKey  = "labels"
	EdgesKey   = "edges"
	// CaptionsKey holds token indices, −1 after a caption's end.
	CaptionsKey = "captions"
	// CaptionFeatsKey, CaptionLensKey and EmptyCaptionFeatsKey hold
	// encoded captions (Set.CaptionFeats, Set.EmptyCaptionFeats).
	CaptionFeatsKey      = "caption_feats"
	CaptionLensKey       = "caption_lens"
	EmptyCaptionFeatsKey = "empty_caption_feats"

	MetaDataset    = "dcdit.dataset"
	MetaNumClasses = "dcdit.num_classes"
	MetaClasses    = "dcdit.classes"
	MetaVocabulary = "dcdit.vocabulary"
	// MetaLabels lists one label per sample, comma-separated: where
	// `dcdit sample` records them. Read falls back to it when the file
	// has no labels tensor.
	MetaLabels = "dcdit.labels"
)

// MaxAbsLatent bounds the magnitude of a latent value that Read and Write
// accept. VAE latents (scaled as DiT does) and the shapes data lie within a
// few units; a finite outlier of 1e30 is a corrupt file, and one such value
// would dominate every error measure computed on the data (a PSNR's peak,
// a relative MSE's denominator).
const MaxAbsLatent = 1e4

// MaxClasses bounds the class count a file may state (dcdit.num_classes),
// which sizes per-class tables downstream.
const MaxClasses = 1 << 24

// Set is a data set held in memory.
type Set struct {
	N, C, H, W int
	// Latents are the samples, [N, C, H, W] row-major.
	Latents []float32
	// Labels hold one class label per sample.
	Labels []int
	// Edges, when not nil, mark the grid cells on a region boundary,
	// [N, H, W]; generators of piecewise-flat data provide them for the
	// router's edge-density measure.
	Edges []bool
	// NumClasses is the number of classes; labels lie in [0, NumClasses).
	NumClasses int
	// Classes names the classes (len NumClasses), or is nil.
	Classes []string
	// Captions, when not nil, hold each sample's caption as indices into
	// Vocabulary (len N; captions may differ in length, each ≥ 1).
	Captions   [][]int
	Vocabulary []string
	// CaptionFeats, when not nil, hold each sample's caption as a text
	// encoder's features, [rows, CaptionDim] row-major (len N, each at
	// least one row), and EmptyCaptionFeats the empty prompt's, which a
	// caption dropped for guidance stands for (nil: none recorded).
	CaptionFeats      [][]float32
	EmptyCaptionFeats []float32
	CaptionDim        int
	// Metadata is extra string metadata written with the file (keys other
	// than the format's own).
	Metadata map[string]string
}

// Latent returns sample i's latent [C, H, W] (a view).
func (s *Set) Latent(i int) []float32 {
	n := s.C * s.H * s.W
	return s.Latents[i*n : (i+1)*n]
}

// Edge returns sample i's edge mask [H, W] (a view), or nil without edges.
func (s *Set) Edge(i int) []bool {
	if s.Edges == nil {
		return nil
	}
	n := s.H * s.W
	return s.Edges[i*n : (i+1)*n]
}

// Batch copies the samples idx into x [len(idx), C, H, W] and their labels
// into y (len(idx)); both are allocated when nil or too short.
func (s *Set) Batch(x []float32, y []int, idx []int) ([]float32, []int, error) {
	n := s.C * s.H * s.W
	if cap(x) < len(idx)*n {
		x = make([]float32, len(idx)*n)
	}
	if cap(y) < len(idx) {
		y = make([]int, len(idx))
	}
	x, y = x[:len(idx)*n], y[:len(idx)]
	for k, i := range idx {
		if i < 0 || i >= s.N {
			return nil, nil, fmt.Errorf("datasets: batch index %d outside [0, %d)", i, s.N)
		}
		copy(x[k*n:(k+1)*n], s.Latent(i))
		y[k] = s.Labels[i]
	}
	return x, y, nil
}

// Range returns the smallest and largest latent value (0, 0 when empty).
func (s *Set) Range() (lo, hi float32) {
	if len(s.Latents) == 0 {
		return 0, 0
	}
	lo, hi = s.Latents[0], s.Latents[0]
	for _, v := range s.Latents {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// Validate checks that the sizes, labels and masks agree.
func (s *Set) Validate() error {
	switch {
	case s.N < 1 || s.C < 1 || s.H < 1 || s.W < 1:
		return fmt.Errorf("datasets: shape [%d %d %d %d]: want every size ≥ 1", s.N, s.C, s.H, s.W)
	case len(s.Latents) != s.N*s.C*s.H*s.W:
		return fmt.Errorf("datasets: %d latent values, want %d for [%d %d %d %d]", len(s.Latents), s.N*s.C*s.H*s.W, s.N, s.C, s.H, s.W)
	case len(s.Labels) != s.N:
		return fmt.Errorf("datasets: %d labels for %d samples", len(s.Labels), s.N)
	case s.Edges != nil && len(s.Edges) != s.N*s.H*s.W:
		return fmt.Errorf("datasets: %d edge-mask values, want %d for [%d %d %d]", len(s.Edges), s.N*s.H*s.W, s.N, s.H, s.W)
	case s.NumClasses < 1:
		return fmt.Errorf("datasets: %d classes, want ≥ 1", s.NumClasses)
	case s.Classes != nil && len(s.Classes) != s.NumClasses:
		return fmt.Errorf("datasets: %d class names for %d classes", len(s.Classes), s.NumClasses)
	}
	for i, l := range s.Labels {
		if l < 0 || l >= s.NumClasses {
			return fmt.Errorf("datasets: label %d of sample %d outside [0, %d)", l, i, s.NumClasses)
		}
	}
	if err := s.checkLatents(); err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	for _, name := range s.Classes {
		if name == "" || strings.ContainsAny(name, ",\n") {
			return fmt.Errorf("datasets: class name %q: want a non-empty name without commas", name)
		}
	}
	if err := s.checkCaptions(); err != nil {
		return err
	}
	return s.checkCaptionFeats()
}

// checkCaptionFeats says what is wrong with the caption features, if
// anything.
func (s *Set) checkCaptionFeats() error {
	if s.CaptionFeats == nil {
		if s.EmptyCaptionFeats != nil {
			return fmt.Errorf("datasets: the empty prompt's features without caption features")
		}
		return nil
	}
	if s.CaptionDim < 1 {
		return fmt.Errorf("datasets: caption features %d wide, want ≥ 1", s.CaptionDim)
	}
	if len(s.CaptionFeats) != s.N {
		return fmt.Errorf("datasets: %d encoded captions for %d samples", len(s.CaptionFeats), s.N)
	}
	check := func(what string, f []float32) error {
		if len(f) == 0 || len(f)%s.CaptionDim != 0 {
			return fmt.Errorf("datasets: %s has %d values, want a positive multiple of %d", what, len(f), s.CaptionDim)
		}
		for j, x := range f {
			if v := float64(x); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("datasets: %s, row %d, column %d: value %v, want a finite value", what, j/s.CaptionDim, j%s.CaptionDim, x)
			}
		}
		return nil
	}
	for i, f := range s.CaptionFeats {
		if err := check(fmt.Sprintf("encoded caption of sample %d", i), f); err != nil {
			return err
		}
	}
	if s.EmptyCaptionFeats != nil {
		return check("the empty prompt's features", s.EmptyCaptionFeats)
	}
	return nil
}

// checkCaptions says what is wrong with the captions, if anything.
func (s *Set) checkCaptions() error {
	if s.Captions == nil {
		if s.Vocabulary != nil {
			return fmt.Errorf("datasets: a vocabulary without captions")
		}
		return nil
	}
	if len(s.Captions) != s.N {
		return fmt.Errorf("datasets: %d captions for %d samples", len(s.Captions), s.N)
	}
	for _, w := range s.Vocabulary {
		if w == "" || strings.ContainsAny(w, ",\n") {
			return fmt.Errorf("datasets: vocabulary word %q: want a non-empty word without commas", w)
		}
	}
	for i, c := range s.Captions {
		if len(c) == 0 {
			return fmt.Errorf("datasets: caption of sample %d is empty", i)
		}
		for j, t := range c {
			if t < 0 || t >= len(s.Vocabulary) {
				return fmt.Errorf("datasets: caption of sample %d, token %d: index %d outside the vocabulary of %d words", i, j, t, len(s.Vocabulary))
			}
		}
	}
	return nil
}

// Write writes s to path atomically (see the package comment for the
// layout).
func Write(path string, s *Set) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	md := map[string]string{}
	for k, v := range s.Metadata {
		md[k] = v
	}
	md[MetaNumClasses] = strconv.Itoa(s.NumClasses)
	if s.Classes != nil {
		md[MetaClasses] = strings.Join(s.Classes, ",")
	}
	lat := dtype.F32Bytes(s.Latents)
	lab := make([]byte, 8*len(s.Labels))
	for i, v := range s.Labels {
		binary.LittleEndian.PutUint64(lab[8*i:], uint64(v))
	}
	ts := []safetensors.WriteTensor{
		{Name: LatentsKey, DType: dtype.F32, Shape: []int64{int64(s.N), int64(s.C), int64(s.H), int64(s.W)}, Data: lat},
		{Name: LabelsKey, DType: dtype.I64, Shape: []int64{int64(s.N)}, Data: lab},
	}
	if s.Edges != nil {
		e := make([]byte, len(s.Edges))
		for i, v := range s.Edges {
			if v {
				e[i] = 1
			}
		}
		ts = append(ts, safetensors.WriteTensor{Name: EdgesKey, DType: dtype.U8, Shape: []int64{int64(s.N), int64(s.H), int64(s.W)}, Data: e})
	}
	if s.Captions != nil {
		T := 0
		for _, c := range s.Captions {
			T = max(T, len(c))
		}
		raw := make([]byte, 8*s.N*T)
		for i, c := range s.Captions {
			for j := range T {
				t := int64(-1)
				if j < len(c) {
					t = int64(c[j])
				}
				binary.LittleEndian.PutUint64(raw[8*(i*T+j):], uint64(t))
			}
		}
		ts = append(ts, safetensors.WriteTensor{Name: CaptionsKey, DType: dtype.I64, Shape: []int64{int64(s.N), int64(T)}, Data: raw})
		md[MetaVocabulary] = strings.Join(s.Vocabulary, ",")
	}
	if s.CaptionFeats != nil {
		ts = append(ts, s.captionFeatTensors()...)
	}
	return safetensors.Write(path, ts, md)
}

// captionFeatTensors lays out the caption features: zero-padded to the
// longest caption, with their lengths, and the empty prompt's.
func (s *Set) captionFeatTensors() []safetensors.WriteTensor {
	D, L := s.CaptionDim, 0
	for _, f := range s.CaptionFeats {
		L = max(L, len(f)/D)
	}
	padded := make([]float32, s.N*L*D)
	lens := make([]byte, 8*s.N)
	for i, f := range s.CaptionFeats {
		copy(padded[i*L*D:], f)
		binary.LittleEndian.PutUint64(lens[8*i:], uint64(len(f)/D))
	}
	ts := []safetensors.WriteTensor{
		{Name: CaptionFeatsKey, DType: dtype.F32, Shape: []int64{int64(s.N), int64(L), int64(D)}, Data: dtype.F32Bytes(padded)},
		{Name: CaptionLensKey, DType: dtype.I64, Shape: []int64{int64(s.N)}, Data: lens},
	}
	if s.EmptyCaptionFeats != nil {
		ts = append(ts, safetensors.WriteTensor{Name: EmptyCaptionFeatsKey, DType: dtype.F32,
			Shape: []int64{int64(len(s.EmptyCaptionFeats) / D), int64(D)}, Data: dtype.F32Bytes(s.EmptyCaptionFeats)})
	}
	return ts
}

// ErrNotDataSet is wrapped by Read's errors when a file is a valid
// safetensors file that does not hold a data set.
var ErrNotDataSet = errors.New("not a data set")

// Read loads a data set file written by Write (or any safetensors file
// with float "latents" [N, C, H, W] and integer "labels" [N] or the
// metadata dcdit.labels, as `dcdit sample` writes; "edges" [N, H, W] is
// optional). The class count is dcdit.num_classes when
// present, else the number of dcdit.classes names, else the largest label
// plus one.
func Read(path string) (*Set, error) { return ReadKeys(path, LatentsKey, LabelsKey) }

// ReadKeys is Read for a file that stores the latents and labels under
// other tensor names (a recipe's data.latents_key and data.labels_key).
func ReadKeys(path, latentsKey, labelsKey string) (*Set, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("datasets: %s: %s", path, fmt.Sprintf(format, args...))
	}
	lt, ok := f.Tensor(latentsKey)
	if !ok {
		return nil, fmt.Errorf("datasets: %s: no tensor %q (want latents [N, C, H, W] and labels [N]): %w", path, latentsKey, ErrNotDataSet)
	}
	if len(lt.Shape) != 4 || !lt.DType.IsFloat() {
		return nil, fail("tensor %q is %s %v, want a float tensor [N, C, H, W]", latentsKey, lt.DType, lt.Shape)
	}
	s := &Set{N: int(lt.Shape[0]), C: int(lt.Shape[1]), H: int(lt.Shape[2]), W: int(lt.Shape[3]), Metadata: map[string]string{}}
	if s.N < 1 || s.C < 1 || s.H < 1 || s.W < 1 {
		return nil, fail("tensor %q has shape %v, want every size ≥ 1", latentsKey, lt.Shape)
	}
	v, err := lt.Float32()
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	s.Latents = append([]float32(nil), v...)

	var labels []int64
	if lb, ok := f.Tensor(labelsKey); ok {
		if len(lb.Shape) != 1 || lb.Shape[0] != int64(s.N) || !lb.DType.IsInt() {
			return nil, fail("tensor %q is %s %v, want integers [%d] (one per latent)", labelsKey, lb.DType, lb.Shape, s.N)
		}
		if labels, err = lb.Int64(); err != nil {
			return nil, fmt.Errorf("datasets: %w", err)
		}
	} else if list, ok := f.Metadata()[MetaLabels]; ok {
		// `dcdit sample` writes its labels here, one per sample.
		for i, field := range strings.Split(list, ",") {
			l, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
			if err != nil {
				return nil, fail("metadata %s: entry %d is %.40q, want an integer", MetaLabels, i, field)
			}
			labels = append(labels, l)
		}
		if len(labels) != s.N {
			return nil, fail("metadata %s holds %d labels for %d latents", MetaLabels, len(labels), s.N)
		}
	} else {
		return nil, fmt.Errorf("datasets: %s: no tensor %q and no metadata %s (want labels [%d]): %w", path, labelsKey, MetaLabels, s.N, ErrNotDataSet)
	}
	s.Labels = make([]int, s.N)
	maxLabel := 0
	for i, l := range labels {
		if l < 0 || l > math.MaxInt32 {
			return nil, fail("label %d of sample %d: want 0 ≤ label < 2³¹", l, i)
		}
		s.Labels[i] = int(l)
		maxLabel = max(maxLabel, int(l))
	}

	if et, ok := f.Tensor(EdgesKey); ok {
		if len(et.Shape) != 3 || et.Shape[0] != int64(s.N) || et.Shape[1] != int64(s.H) || et.Shape[2] != int64(s.W) || !et.DType.IsInt() {
			return nil, fail("tensor %q is %s %v, want integers or BOOL [%d %d %d]", EdgesKey, et.DType, et.Shape, s.N, s.H, s.W)
		}
		e, err := et.Int64()
		if err != nil {
			return nil, fmt.Errorf("datasets: %w", err)
		}
		s.Edges = make([]bool, len(e))
		for i, x := range e {
			s.Edges[i] = x != 0
		}
	}

	md := f.Metadata()
	if ct, ok := f.Tensor(CaptionsKey); ok {
		if err := s.readCaptions(ct, md[MetaVocabulary]); err != nil {
			return nil, fail("%v", err)
		}
	}
	if err := s.readCaptionFeats(f); err != nil {
		return nil, fail("%v", err)
	}
	for k, v := range md {
		if k != MetaNumClasses && k != MetaClasses && k != MetaVocabulary {
			s.Metadata[k] = v
		}
	}
	if names, ok := md[MetaClasses]; ok && names != "" {
		s.Classes = strings.Split(names, ",")
		for i, name := range s.Classes {
			if name == "" || strings.Contains(name, "\n") {
				return nil, fail("metadata %s: name %d is %.40q, want a non-empty name on one line", MetaClasses, i, name)
			}
		}
	}
	switch nc, ok := md[MetaNumClasses]; {
	case ok:
		n, err := strconv.Atoi(nc)
		if err != nil || n < 1 || n > MaxClasses {
			return nil, fail("metadata %s = %.40q, want an integer 1 … %d", MetaNumClasses, nc, MaxClasses)
		}
		s.NumClasses = n
	case s.Classes != nil:
		s.NumClasses = len(s.Classes)
	default:
		s.NumClasses = maxLabel + 1
	}
	if s.Classes != nil && len(s.Classes) != s.NumClasses {
		return nil, fail("metadata %s names %d classes but %s is %d", MetaClasses, len(s.Classes), MetaNumClasses, s.NumClasses)
	}
	if maxLabel >= s.NumClasses {
		return nil, fail("label %d outside [0, %d) (%s)", maxLabel, s.NumClasses, MetaNumClasses)
	}
	if err := s.checkLatents(); err != nil {
		return nil, fail("%v", err)
	}
	return s, nil
}

// readCaptions reads the captions tensor [N, T] and the vocabulary
// metadata, checking both.
func (s *Set) readCaptions(ct *safetensors.Tensor, vocab string) error {
	if len(ct.Shape) != 2 || ct.Shape[0] != int64(s.N) || ct.Shape[1] < 1 || !ct.DType.IsInt() {
		return fmt.Errorf("tensor %q is %s %v, want integers [%d, T]", CaptionsKey, ct.DType, ct.Shape, s.N)
	}
	if vocab == "" {
		return fmt.Errorf("tensor %q without metadata %s", CaptionsKey, MetaVocabulary)
	}
	toks, err := ct.Int64()
	if err != nil {
		return err
	}
	s.Vocabulary = strings.Split(vocab, ",")
	T := int(ct.Shape[1])
	s.Captions = make([][]int, s.N)
	for i := range s.N {
		for j, t := range toks[i*T : (i+1)*T] {
			if t == -1 {
				for k := j; k < T; k++ {
					if rest := toks[i*T+k]; rest != -1 {
						return fmt.Errorf("caption of sample %d: index %d at position %d follows the −1 padding", i, rest, k)
					}
				}
				break
			}
			if t < 0 || t >= int64(len(s.Vocabulary)) {
				return fmt.Errorf("caption of sample %d, token %d: index %d outside the vocabulary of %d words (%s)", i, j, t, len(s.Vocabulary), MetaVocabulary)
			}
			s.Captions[i] = append(s.Captions[i], int(t))
		}
	}
	return s.checkCaptions()
}

// readCaptionFeats reads the caption features [N, L, D], their lengths
// [N] and the empty prompt's [E, D], when the file has them, checking
// them.
func (s *Set) readCaptionFeats(f *safetensors.File) error {
	ft, ok := f.Tensor(CaptionFeatsKey)
	if !ok {
		for _, k := range []string{CaptionLensKey, EmptyCaptionFeatsKey} {
			if _, ok := f.Tensor(k); ok {
				return fmt.Errorf("tensor %q without %q", k, CaptionFeatsKey)
			}
		}
		return nil
	}
	if len(ft.Shape) != 3 || ft.Shape[0] != int64(s.N) || ft.Shape[1] < 1 || ft.Shape[2] < 1 || !ft.DType.IsFloat() {
		return fmt.Errorf("tensor %q is %s %v, want floats [%d, L, D]", CaptionFeatsKey, ft.DType, ft.Shape, s.N)
	}
	lt, ok := f.Tensor(CaptionLensKey)
	if !ok {
		return fmt.Errorf("tensor %q without %q (want integers [%d])", CaptionFeatsKey, CaptionLensKey, s.N)
	}
	if len(lt.Shape) != 1 || lt.Shape[0] != int64(s.N) || !lt.DType.IsInt() {
		return fmt.Errorf("tensor %q is %s %v, want integers [%d]", CaptionLensKey, lt.DType, lt.Shape, s.N)
	}
	L, D := int(ft.Shape[1]), int(ft.Shape[2])
	lens, err := lt.Int64()
	if err != nil {
		return err
	}
	feats, err := ft.Float32()
	if err != nil {
		return err
	}
	s.CaptionDim = D
	s.CaptionFeats = make([][]float32, s.N)
	for i, n := range lens {
		if n < 1 || n > int64(L) {
			return fmt.Errorf("tensor %q: caption of sample %d has %d rows, want 1 … %d", CaptionLensKey, i, n, L)
		}
		s.CaptionFeats[i] = append([]float32(nil), feats[i*L*D:(i*L+int(n))*D]...)
	}
	if et, ok := f.Tensor(EmptyCaptionFeatsKey); ok {
		if len(et.Shape) != 2 || et.Shape[0] < 1 || et.Shape[1] != int64(D) || !et.DType.IsFloat() {
			return fmt.Errorf("tensor %q is %s %v, want floats [E, %d]", EmptyCaptionFeatsKey, et.DType, et.Shape, D)
		}
		e, err := et.Float32()
		if err != nil {
			return err
		}
		s.EmptyCaptionFeats = append([]float32(nil), e...)
	}
	return s.checkCaptionFeats()
}

// checkLatents rejects the first non-finite or implausibly large latent
// value, naming its sample, its position in the sample and the value.
func (s *Set) checkLatents() error {
	n := max(s.C*s.H*s.W, 1)
	for i, x := range s.Latents {
		v := float64(x)
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxAbsLatent {
			c, cell := (i%n)/max(s.H*s.W, 1), i%max(s.H*s.W, 1)
			return fmt.Errorf("latent value %v in sample %d (index %d: channel %d, row %d, column %d): want a finite value within ±%g", x, i/n, i%n, c, cell/max(s.W, 1), cell%max(s.W, 1), MaxAbsLatent)
		}
	}
	return nil
}

// DeriveEdges returns edge masks [N, H, W] computed from the latents: a
// cell is an edge when one of its 4-neighbours differs from it by more
// than threshold in Euclidean distance over the channels. On
// piecewise-flat data whose regions differ by more than threshold (the
// shapes data set with threshold DeriveEdgesFraction of its value range)
// this equals the generator's masks; on other data it marks the cells of
// high local contrast.
func (s *Set) DeriveEdges(threshold float64) []bool {
	hw := s.H * s.W
	edges := make([]bool, s.N*hw)
	t2 := threshold * threshold
	differ := func(x []float32, a, b int) bool {
		var d float64
		for c := range s.C {
			v := float64(x[c*hw+a]) - float64(x[c*hw+b])
			d += v * v
		}
		return d > t2
	}
	for i := range s.N {
		x := s.Latent(i)
		e := edges[i*hw : (i+1)*hw]
		for r := range s.H {
			for c := range s.W {
				l := r*s.W + c
				if c+1 < s.W && differ(x, l, l+1) {
					e[l], e[l+1] = true, true
				}
				if r+1 < s.H && differ(x, l, l+s.W) {
					e[l], e[l+s.W] = true, true
				}
			}
		}
	}
	return edges
}

// DeriveEdgesFraction is the threshold, as a fraction of the data's value
// range, that evaluation uses to derive edge masks for data sets without
// them.
const DeriveEdgesFraction = 0.25

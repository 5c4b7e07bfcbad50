package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/params"
)

// Info is what a model does not know about itself and a checkpoint
// records: the ρ values it was trained for, the recipe, the base, and how
// it samples.
type Info struct {
	TrainedRhos []float64
	Recipe      string
	Base        *Base
	// Sampling, when not nil, is how the model samples as it was
	// evaluated (Meta.Sampling).
	Sampling *Sampling
	// DType is the storage type of the parameters: F32 (also the zero
	// value), BF16 or F16. Load reads any of them back into float32.
	DType dtype.DType
	// Extra are further metadata entries the file carries (a Z-Image
	// backbone's caption table, shapes.CaptionTableKey); they may not
	// take the format's own keys.
	Extra map[string]string
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes the model to path as a DC checkpoint (see the package
// documentation), atomically: a temporary file in the same folder, fsync,
// rename. Parameters are stored under their reference names, in
// info.DType (F32 unless set); the checksums cover the stored bytes.
func Save(path string, model *dc.Model, info Info) error {
	meta, err := MetaOf(model, info)
	if err != nil {
		return err
	}
	dt := info.DType
	if dt == dtype.Invalid {
		dt = dtype.F32
	}
	if _, err := dtype.NewFloat32Reader(nil, dt); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	// Each part's names are checked against its own part of the format, so
	// that a backbone parameter under a scaffold name (a DiT's x_embedder
	// not renamed under dc.BackbonePrefix) is named as such.
	type part struct {
		what   string
		set    *params.Set
		shapes map[string][]int
	}
	parts := []part{{"scaffold", model.Params, dc.ScaffoldShapes(&meta.Scaffold)}}
	if bb := model.Backbone.Parameters(); bb != nil {
		parts = append(parts, part{meta.Backbone.Kind + " backbone", bb, meta.backboneShapes()})
	}
	shapes := meta.Shapes()
	var tensors []safetensors.WriteTensor
	sums := map[string]string{}
	for _, part := range parts {
		for _, p := range part.set.List() {
			shape, ok := part.shapes[p.Name]
			if !ok {
				hint := ""
				if part.what != "scaffold" && meta.Backbone.Kind != KindHNet {
					hint = fmt.Sprintf(" (a %s backbone stores its tensors under %q: rename it with PrefixNames(dc.BackbonePrefix))", meta.Backbone.Kind, dc.BackbonePrefix)
				}
				return fmt.Errorf("checkpoint: save %s: %s parameter %q is not part of the format%s", path, part.what, p.Name, hint)
			}
			if _, dup := sums[p.Name]; dup {
				return fmt.Errorf("checkpoint: save %s: parameter %q appears twice", path, p.Name)
			}
			v := p.Values()
			if n := numel(shape); n != len(v) {
				return fmt.Errorf("checkpoint: save %s: parameter %q holds %d values, want %v = %d", path, p.Name, len(v), shape, n)
			}
			h := crc32.New(castagnoli)
			r, _ := dtype.NewFloat32Reader(v, dt) // dt was checked above
			io.Copy(h, r)
			sums[p.Name] = fmt.Sprintf("%08x", h.Sum32())
			shape64 := make([]int64, len(shape))
			for i, d := range shape {
				shape64[i] = int64(d)
			}
			src, _ := dtype.NewFloat32Reader(v, dt)
			tensors = append(tensors, safetensors.WriteTensor{Name: p.Name, DType: dt, Shape: shape64, Src: src})
		}
	}
	if len(tensors) != len(shapes) {
		var missing []string
		for name := range shapes {
			if _, ok := sums[name]; !ok {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		return fmt.Errorf("checkpoint: save %s: the model lacks %s", path, arch.JoinCapped(missing, ", ", maxListed))
	}
	cfgJSON, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	sumJSON, err := json.Marshal(sums)
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	md := map[string]string{"format": "pt", ConfigKey: string(cfgJSON), ChecksumKey: string(sumJSON)}
	for k, v := range info.Extra {
		if _, taken := md[k]; taken {
			return fmt.Errorf("checkpoint: save %s: extra metadata key %q is the format's own", path, k)
		}
		md[k] = v
	}
	if err := safetensors.Write(path, tensors, md); err != nil {
		return fmt.Errorf("checkpoint: save: %w", err)
	}
	return nil
}

// maxListed is how many names an error message lists before it counts
// the rest.
const maxListed = 10

// Load reads a DC checkpoint (a safetensors file, or a sharded folder or
// index) and builds the model it describes. Everything is checked: the
// metadata, every tensor's presence, shape and dtype, no tensor beyond the
// format's, and the checksums when present (a file without them loads, with
// a warning in the returned Meta's Warnings that the caller shows). Errors
// name the file, the tensor, what was expected and what was found, in one
// line that lists at most a few names.
func Load(path string) (*dc.Model, *Meta, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer ck.Close()
	meta, err := ParseMeta(ck.Metadata)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	found := make(map[string][]int, len(ck.Tensors))
	for _, t := range ck.Tensors {
		found[t.Name] = nil
	}
	if err := meta.CheckTensors(found); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: __metadata__ %q: %w", path, ConfigKey, err)
	}
	expected := meta.Shapes()
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(expected)) {
		if _, ok := ck.Tensor(name); !ok {
			problems = append(problems, fmt.Sprintf("tensor %q missing (want shape %v)", name, expected[name]))
		}
	}
	ts := make(map[string]dc.Tensor, len(expected))
	for _, t := range ck.Tensors {
		want, ok := expected[t.Name]
		found := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			found[i] = int(d)
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("unexpected tensor %q (shape %v)", t.Name, found))
			continue
		case !slices.Equal(found, want):
			problems = append(problems, fmt.Sprintf("tensor %q: shape %v, want %v", t.Name, found, want))
			continue
		case !t.DType.IsFloat():
			problems = append(problems, fmt.Sprintf("tensor %q: dtype %s, want a float type (F32)", t.Name, t.DType))
			continue
		}
		ts[t.Name] = dc.Tensor{Shape: found}
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("checkpoint: %s: %s", path, arch.JoinCapped(problems, "; ", maxListed))
	}
	sums, err := ParseChecksums(ck.Metadata)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	for _, t := range ck.Tensors {
		if sums != nil {
			want, ok := sums[t.Name]
			if !ok {
				return nil, nil, fmt.Errorf("checkpoint: %s: __metadata__ %q lists no checksum for tensor %q", path, ChecksumKey, t.Name)
			}
			raw, err := t.Bytes()
			if err != nil {
				return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", path, t.Name, err)
			}
			if got := fmt.Sprintf("%08x", crc32.Checksum(raw, castagnoli)); got != want {
				return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: CRC-32C %s, want %s: the data is corrupted", path, t.Name, got, want)
			}
		}
		// F32 data may alias the file's memory map; dc.NewParams copies it
		// into the arena before the file is closed.
		v, err := t.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: %s: %w", path, err)
		}
		ts[t.Name] = dc.Tensor{Shape: ts[t.Name].Shape, Data: v}
	}
	if sums != nil && len(sums) != len(ck.Tensors) {
		var extra []string
		for name := range sums {
			if _, ok := ts[name]; !ok {
				extra = append(extra, name)
			}
		}
		sort.Strings(extra)
		return nil, nil, fmt.Errorf("checkpoint: %s: __metadata__ %q lists checksums of absent tensors %s", path, ChecksumKey, arch.JoinCapped(extra, ", ", maxListed))
	}
	bb, err := meta.newBackbone(ts)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	cfg := meta.Scaffold
	model, err := dc.New(&cfg, ts, bb)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	return model, meta, nil
}

// ParseChecksums reads the __metadata__ "dcdit.crc32c" map (tensor name →
// 8 hex digits), nil when the key is absent.
func ParseChecksums(md map[string]string) (map[string]string, error) {
	raw, ok := md[ChecksumKey]
	if !ok {
		return nil, nil
	}
	var sums map[string]string
	if err := family.DecodeStrict([]byte(raw), &sums); err != nil {
		return nil, fmt.Errorf("__metadata__ %q is not a JSON object of tensor checksums: %s", ChecksumKey, capped(err))
	}
	if sums == nil {
		return nil, fmt.Errorf("__metadata__ %q is null, want a JSON object of tensor checksums", ChecksumKey)
	}
	for name, s := range sums {
		if _, err := hex.DecodeString(s); err != nil || len(s) != 8 {
			return nil, fmt.Errorf("__metadata__ %q: checksum %.20q of tensor %.200q is not 8 hex digits", ChecksumKey, s, name)
		}
	}
	return sums, nil
}

// DescribeBase identifies a pretrained checkpoint for Info.Base: its
// architecture and layout, the total size and newest modification time of
// its weight files, and with hash their SHA-256 (which reads every byte).
func DescribeBase(path string, hash bool) (*Base, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: base: %w", err)
	}
	defer ck.Close()
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	rep := arch.Detect(in)
	b := &Base{Path: path, Architecture: string(rep.Architecture), Layout: string(rep.Layout)}
	files := make([]string, 0, len(ck.Files))
	for _, f := range ck.Files {
		files = append(files, f.Path)
	}
	sort.Strings(files)
	var newest time.Time
	h := sha256.New()
	for _, name := range files {
		st, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: base: %w", err)
		}
		b.Size += st.Size()
		if st.ModTime().After(newest) {
			newest = st.ModTime()
		}
		if hash {
			f, err := os.Open(name)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: base: %w", err)
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("checkpoint: base: %s: %w", name, err)
			}
		}
	}
	b.ModTime = newest.UTC().Format(time.RFC3339)
	if hash {
		b.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return b, nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Package loaders opens model checkpoints in every form dcdit accepts — a
// safetensors file, a sharded safetensors folder or index, a PyTorch .pt
// file, a diffusers model folder — behind one lazy tensor view. Opening reads
// headers (or the pickle) only; tensor data is read when asked for.
package loaders

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/mmapfile"
	"github.com/dcdit/dcdit/loaders/pytorch"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Format names how a checkpoint is stored.
type Format string

// The storage formats.
const (
	FormatSafetensors Format = "safetensors"
	FormatSharded     Format = "safetensors-sharded"
	FormatPyTorch     Format = "pytorch"
)

// FileInfo describes one file of a checkpoint.
type FileInfo struct {
	Path    string `json:"path"`
	Bytes   int64  `json:"bytes"`
	Tensors int    `json:"tensors"`
}

// Training describes the wrapper of a PyTorch training checkpoint
// ({"model", "ema", "opt", "args"}).
type Training struct {
	// Selected is the top-level key whose state dict was taken ("ema" is
	// preferred over "model").
	Selected string         `json:"selected"`
	TopLevel []string       `json:"top_level"`
	Args     map[string]any `json:"args,omitempty"`
	// Config is the pickled config stored under "config" (the official
	// DC-DiT's config.Config, nested objects as maps), if any.
	Config map[string]any `json:"config,omitempty"`
}

// Checkpoint is an opened checkpoint: its tensors (sorted by name), files,
// metadata and, for diffusers folders, the model's config.json.
type Checkpoint struct {
	Path    string // as given by the user
	Format  Format
	Files   []FileInfo
	Tensors []*Tensor
	// Metadata is the safetensors __metadata__ (merged over shards).
	Metadata map[string]string
	// Config is the parsed config.json found next to the weights, if any.
	Config     map[string]any
	ConfigPath string
	Training   *Training
	// Warnings are problems that do not prevent use (a stale total_size,
	// shards whose metadata disagree).
	Warnings []string

	byName  map[string]*Tensor
	closers []io.Closer
}

// Tensor is a lazy handle to one checkpoint tensor.
type Tensor struct {
	Name  string
	DType dtype.DType
	Shape []int64
	File  string // path of the file holding the data

	st *safetensors.Tensor
	pt *ptSource
}

// NumElements is the product of the shape.
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the tensor's raw little-endian data in row-major order. It may
// alias a read-only memory map: do not modify it.
func (t *Tensor) Bytes() ([]byte, error) {
	if t.st != nil {
		return t.st.Bytes()
	}
	return t.pt.bytes()
}

// Section returns a reader over the tensor's raw bytes (as Bytes) that
// reads the file with pread instead of mapping it, so that a streaming
// copy of a large model keeps only its buffers in memory. A strided
// PyTorch tensor, which has no contiguous byte range, is gathered first.
func (t *Tensor) Section() (*io.SectionReader, error) {
	if t.st != nil {
		return t.st.Reader(), nil
	}
	if off, n, ok := t.pt.t.ByteRange(); ok {
		return io.NewSectionReader(t.pt.file.f, off, n), nil
	}
	raw, err := t.pt.t.ReadBytes(t.pt.file.f)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(bytes.NewReader(raw), 0, int64(len(raw))), nil
}

// Float32 returns the values as float32, decoding other dtypes. F32 data at
// an aligned address is returned without copying and must not be modified.
func (t *Tensor) Float32() ([]float32, error) {
	raw, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	v, err := dtype.ToFloat32(raw, t.DType)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
	}
	return v, nil
}

// DecodeFloat32 decodes the tensor into dst, which must hold exactly
// NumElements values (for filling preallocated parameters). It reads the
// file through Section in chunks of decodeChunk bytes rather than mapping
// it, so that filling a model as large as memory keeps one copy of its
// values resident, not two.
func (t *Tensor) DecodeFloat32(dst []float32) error { return t.decodeFloat32(dst, decodeChunk) }

// decodeFloat32 is DecodeFloat32 reading chunk bytes at a time (rounded
// down to whole elements, at least one).
func (t *Tensor) decodeFloat32(dst []float32, chunk int) error {
	if int64(len(dst)) != t.NumElements() {
		return fmt.Errorf("%s: tensor %q: destination holds %d values, tensor %v has %d", t.File, t.Name, len(dst), t.Shape, t.NumElements())
	}
	size := t.DType.Size()
	if size <= 0 {
		// Sub-byte elements pack across bytes: decode the whole tensor.
		raw, err := t.Bytes()
		if err != nil {
			return err
		}
		if err := dtype.DecodeFloat32(dst, raw, t.DType); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
		}
		return nil
	}
	sec, err := t.Section()
	if err != nil {
		return err
	}
	if want := int64(len(dst)) * int64(size); sec.Size() != want {
		return fmt.Errorf("%s: tensor %q: %d bytes of data, want %d for %v %s", t.File, t.Name, sec.Size(), want, t.Shape, t.DType)
	}
	per := max(chunk/size, 1)
	if t.DType == dtype.F32 && hostLittleEndian {
		// The file's bytes are dst's: read them in place.
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst))
		for done := 0; done < len(b); done += per * 4 {
			if _, err := sec.ReadAt(b[done:min(done+per*4, len(b))], int64(done)); err != nil {
				return fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
			}
		}
		return nil
	}
	buf := make([]byte, min(per, len(dst))*size)
	for done := 0; done < len(dst); {
		n := min(per, len(dst)-done)
		raw := buf[:n*size]
		if _, err := sec.ReadAt(raw, int64(done)*int64(size)); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
		}
		if err := dtype.DecodeFloat32(dst[done:done+n], raw, t.DType); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
		}
		done += n
	}
	return nil
}

// hostLittleEndian says whether the host stores a float32 in the byte order
// of an F32 tensor (little-endian), so that its bytes can be read into a
// []float32 as they are.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// decodeChunk is DecodeFloat32's read size: large enough that the reads
// cost no more than a memory map's page faults, small beside any model.
const decodeChunk = 4 << 20

// Int64 decodes an integer or BOOL tensor.
func (t *Tensor) Int64() ([]int64, error) {
	raw, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	v, err := dtype.ToInt64(raw, t.DType)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
	}
	return v, nil
}

// Tensor returns the named tensor.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// ArchInput is what arch.Detect reads of the checkpoint: its metadata,
// config.json, training arguments and tensor headers, with the head count
// numHeads (0: unknown; checkpoints do not store it).
func (c *Checkpoint) ArchInput(numHeads int) arch.Input {
	in := arch.Input{Metadata: c.Metadata, Config: c.Config, NumHeads: numHeads}
	if c.Training != nil {
		in.Args = c.Training.Args
	}
	for _, t := range c.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return in
}

// Shapes lists the tensors' shapes by name, as the model packages size
// their tensors (int dimensions).
func (c *Checkpoint) Shapes() map[string][]int {
	shapes := make(map[string][]int, len(c.Tensors))
	for _, t := range c.Tensors {
		sh := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			sh[i] = int(d)
		}
		shapes[t.Name] = sh
	}
	return shapes
}

// TotalBytes is the sum of all tensors' byte sizes.
func (c *Checkpoint) TotalBytes() int64 {
	var n int64
	for _, t := range c.Tensors {
		n += t.NumElements() * int64(t.DType.Bits()) / 8
	}
	return n
}

// Close releases every file.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, cl := range c.closers {
		errs = append(errs, cl.Close())
	}
	c.closers = nil
	return errors.Join(errs...)
}

// ErrNoWeights is wrapped when a folder holds no checkpoint file.
var ErrNoWeights = errors.New("no weights found")

// Open opens the checkpoint at path: a .safetensors file, a
// *.safetensors.index.json, a PyTorch zip checkpoint (.pt, .pth, .bin,
// .ckpt), a folder holding one of those, or a diffusers model folder (whose
// transformer/ subfolder is used).
func Open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	if st.IsDir() {
		return openDir(path)
	}
	c, err := openFile(path)
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

func openDir(dir string) (*Checkpoint, error) {
	// A diffusers pipeline folder keeps the denoiser in transformer/.
	if sub := filepath.Join(dir, "transformer"); isDir(sub) {
		c, err := openDir(sub)
		if err != nil {
			return nil, err
		}
		c.Path = dir
		return c, nil
	}
	weights, err := findWeights(dir)
	if err != nil {
		return nil, err
	}
	c, err := openFile(weights)
	if err != nil {
		return nil, err
	}
	c.Path = dir
	if cfgPath := filepath.Join(dir, "config.json"); fileExists(cfgPath) {
		cfg, err := readJSONObject(cfgPath)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Config, c.ConfigPath = cfg, cfgPath
	}
	return c, nil
}

// findWeights picks the checkpoint file of a folder: an index if there is
// one, else a single safetensors file, else a single PyTorch file. Several
// candidates of the same kind are ambiguous unless one is the plain
// (non-variant) diffusers or transformers name.
func findWeights(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("open checkpoint: %w", err)
	}
	var index, single, torch []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		n := e.Name()
		switch {
		case strings.HasSuffix(n, safetensors.IndexSuffix):
			index = append(index, n)
		case strings.HasSuffix(n, ".safetensors"):
			single = append(single, n)
		case hasAnySuffix(n, ".pt", ".pth", ".bin", ".ckpt"):
			torch = append(torch, n)
		}
	}
	preferred := []string{"diffusion_pytorch_model", "model", "pytorch_model"}
	for _, group := range []struct {
		names  []string
		suffix string
	}{{index, safetensors.IndexSuffix}, {unsharded(single, index), ".safetensors"}, {torch, ""}} {
		switch len(group.names) {
		case 0:
			continue
		case 1:
			return filepath.Join(dir, group.names[0]), nil
		}
		for _, p := range preferred {
			for _, n := range group.names {
				if strings.TrimSuffix(n, group.suffix) == p || (group.suffix == "" && strings.TrimSuffix(n, filepath.Ext(n)) == p) {
					return filepath.Join(dir, n), nil
				}
			}
		}
		return "", fmt.Errorf("open checkpoint: %s holds several candidate weight files (%s); name one of them", dir, arch.JoinCapped(group.names, ", ", 8))
	}
	return "", fmt.Errorf("open checkpoint: %s: %w (looked for *%s, *.safetensors, *.pt, *.pth, *.bin, *.ckpt)", dir, ErrNoWeights, safetensors.IndexSuffix)
}

// unsharded drops shard files from names when an index covers them: a folder
// with an index is opened through it. Without an index, shards are ambiguous
// on purpose: the index is what says they belong together.
func unsharded(names, index []string) []string {
	if len(index) > 0 {
		return nil
	}
	return names
}

func openFile(path string) (*Checkpoint, error) {
	switch {
	case strings.HasSuffix(path, safetensors.IndexSuffix):
		return openSharded(path)
	case strings.HasSuffix(path, ".safetensors"):
		return openSafetensors(path)
	}
	head := make([]byte, 8)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	if n == 0 {
		return nil, fmt.Errorf("open checkpoint: %s: file is empty", path)
	}
	if pytorch.IsZipCheckpoint(head[:n]) || hasAnySuffix(path, ".pt", ".pth", ".bin", ".ckpt") {
		// The PyTorch reader reads zip and legacy files and explains
		// TorchScript ones.
		return openPyTorch(path)
	}
	// A safetensors file under another name is recognised by its header.
	if c, err := openSafetensors(path); err == nil {
		return c, nil
	}
	return nil, fmt.Errorf("open checkpoint: %s: not a safetensors file, an index or a PyTorch zip checkpoint (first bytes % x)", path, head[:n])
}

func openSafetensors(path string) (*Checkpoint, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Format: FormatSafetensors, Metadata: f.Metadata(), closers: []io.Closer{f}}
	c.Files = []FileInfo{{Path: path, Bytes: f.Size(), Tensors: len(f.Tensors())}}
	for _, info := range f.Tensors() {
		st, _ := f.Tensor(info.Name)
		c.add(&Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, File: path, st: st})
	}
	c.finish()
	return c, nil
}

func openSharded(path string) (*Checkpoint, error) {
	s, err := safetensors.OpenSharded(path)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Format: FormatSharded, closers: []io.Closer{s}, Warnings: s.Warnings}
	for _, f := range s.Shards {
		c.Files = append(c.Files, FileInfo{Path: f.Path, Bytes: f.Size(), Tensors: len(f.Tensors())})
		c.mergeMetadata(f.Path, f.Metadata())
		for _, info := range f.Tensors() {
			st, _ := f.Tensor(info.Name)
			c.add(&Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, File: f.Path, st: st})
		}
	}
	c.finish()
	return c, nil
}

// mergeMetadata keeps the first shard's value of each key and warns when a
// later shard disagrees.
func (c *Checkpoint) mergeMetadata(file string, md map[string]string) {
	if len(md) == 0 {
		return
	}
	if c.Metadata == nil {
		c.Metadata = make(map[string]string, len(md))
	}
	for k, v := range md {
		if old, ok := c.Metadata[k]; ok && old != v {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: __metadata__ %q is %q, another shard says %q", filepath.Base(file), k, v, old))
			continue
		}
		c.Metadata[k] = v
	}
}

func openPyTorch(path string) (*Checkpoint, error) {
	pf, err := pytorch.Open(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	shared := &ptFile{f: f, size: st.Size()}
	c := &Checkpoint{Format: FormatPyTorch, closers: []io.Closer{shared}}
	c.Files = []FileInfo{{Path: path, Bytes: st.Size(), Tensors: len(pf.Tensors)}}
	if pf.Selected != "" {
		c.Training = &Training{Selected: pf.Selected, TopLevel: pf.TopLevel, Args: pf.Args, Config: pf.Config}
	}
	for i := range pf.Tensors {
		t := &pf.Tensors[i]
		if _, dup := c.byName[t.Name]; dup {
			c.Close()
			return nil, fmt.Errorf("pytorch: %s: tensor %q appears twice in the state dict", path, t.Name)
		}
		c.add(&Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, File: path, pt: &ptSource{t: t, file: shared}})
	}
	c.finish()
	return c, nil
}

func (c *Checkpoint) add(t *Tensor) {
	if c.byName == nil {
		c.byName = make(map[string]*Tensor)
	}
	c.byName[t.Name] = t
	c.Tensors = append(c.Tensors, t)
}

func (c *Checkpoint) finish() {
	sort.Slice(c.Tensors, func(i, j int) bool { return c.Tensors[i].Name < c.Tensors[j].Name })
}

// ptFile is a .pt file shared by its tensors and mapped on first use.
type ptFile struct {
	f    *os.File
	size int64
	once sync.Once
	m    *mmapfile.Map
	err  error
}

func (p *ptFile) data() ([]byte, error) {
	p.once.Do(func() { p.m, p.err = mmapfile.Open(p.f, p.size) })
	if p.err != nil {
		return nil, p.err
	}
	return p.m.Data, nil
}

func (p *ptFile) Close() error {
	var err error
	if p.m != nil {
		err = p.m.Close()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}

type ptSource struct {
	t    *pytorch.Tensor
	file *ptFile
}

// bytes returns contiguous tensors straight from the map and gathers
// strided ones into a new buffer.
func (s *ptSource) bytes() ([]byte, error) {
	if off, n, ok := s.t.ByteRange(); ok {
		data, err := s.file.data()
		if err != nil {
			return nil, fmt.Errorf("pytorch: %w", err)
		}
		return data[off : off+n : off+n], nil
	}
	return s.t.ReadBytes(s.file.f)
}

func readJSONObject(path string) (map[string]any, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	var v map[string]any
	if err := json.Unmarshal(text, &v); err != nil {
		return nil, fmt.Errorf("open checkpoint: %s: not a JSON object: %v", path, err)
	}
	return v, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

package convert

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/posembed"
)

// WriteOptions say how Execute lays the output out.
type WriteOptions struct {
	// ShardSize splits a folder output into shards of at most this many
	// tensor bytes (a larger tensor gets a shard of its own); 0 writes one
	// file. A .safetensors output is always one file.
	ShardSize int64
	// Progress, when set, is called as tensor bytes are written, with the
	// bytes done and the total.
	Progress func(done, total int64)
}

// Source is where Execute reads the input tensors: the opened checkpoint
// the plan was made from.
type Source interface {
	Tensor(name string) (*loaders.Tensor, bool)
}

// ioChunk is the size of the buffers a conversion streams through.
const ioChunk = 1 << 20

// Execute writes the planned checkpoint to out, reading each source tensor
// as it is written, so that memory holds a few buffers, never the model.
// out ending in .safetensors is one file; any other out is a folder (the
// form diffusers and Hugging Face use) holding the weights — one file, or
// shards base-00001-of-0000N.safetensors with base.safetensors.index.json,
// base being diffusion_pytorch_model for the diffusers layout and model
// otherwise — and config.json. Everything is written under temporary names
// and renamed into place at the end; on any error nothing is left at out.
// An existing out is refused.
func Execute(p *Plan, src Source, out string, opts WriteOptions) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("convert: %s already exists; remove it or choose another output", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("convert: %w", err)
	}
	cw := &countingWriter{total: p.TotalBytes(), progress: opts.Progress}
	if strings.HasSuffix(out, ".safetensors") {
		return writeFile(p, src, out, cw)
	}
	return writeFolder(p, src, out, opts.ShardSize, cw)
}

// writeFile writes one file under a temporary name beside out (the name
// atomicfile.RemoveTemps recognises) and renames it into place.
func writeFile(p *Plan, src Source, out string, cw *countingWriter) (err error) {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := writeShard(tmp, writeTensors(p, src, p.Outputs), p.Metadata, cw); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	syncDir(filepath.Dir(out))
	return nil
}

// syncDir makes a rename durable where the platform allows it; a failure
// only weakens durability (the rename has happened), so it is ignored.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// writeFolder fills a temporary folder beside out and renames it to out.
func writeFolder(p *Plan, src Source, out string, shardSize int64, cw *countingWriter) (err error) {
	out = filepath.Clean(out)
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	base := "model"
	if p.To == arch.Diffusers {
		base = "diffusion_pytorch_model"
	}
	sizes := make([]int64, len(p.Outputs))
	for i := range p.Outputs {
		sizes[i] = p.Outputs[i].Bytes()
	}
	groups := [][]int{make([]int, len(sizes))}
	for i := range groups[0] {
		groups[0][i] = i
	}
	if shardSize > 0 {
		groups = safetensors.GroupShards(sizes, shardSize)
	}
	if len(groups) <= 1 {
		name := base + ".safetensors"
		if err := writeShard(filepath.Join(tmp, name), writeTensors(p, src, p.Outputs), p.Metadata, cw); err != nil {
			return err
		}
	} else {
		wm := make(map[string]string, len(p.Outputs))
		for gi, g := range groups {
			name := safetensors.ShardName(base, gi+1, len(groups))
			outs := make([]Output, len(g))
			for j, i := range g {
				outs[j] = p.Outputs[i]
				wm[p.Outputs[i].Name] = name
			}
			if err := writeShard(filepath.Join(tmp, name), writeTensors(p, src, outs), p.Metadata, cw); err != nil {
				return err
			}
		}
		if err := safetensors.WriteIndex(filepath.Join(tmp, base+safetensors.IndexSuffix), wm, p.TotalBytes()); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	if p.Config == nil {
		return fmt.Errorf("convert: the %s has no known configuration, which a model folder needs as config.json; write one .safetensors file instead", p.Architecture)
	}
	if err := writeConfig(filepath.Join(tmp, "config.json"), p.Config); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	syncDir(filepath.Dir(out))
	return nil
}

func writeShard(path string, tensors []safetensors.WriteTensor, md map[string]string, cw *countingWriter) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	bw := bufio.NewWriterSize(f, ioChunk)
	cw.w, cw.bw, cw.file = bw, bw, f
	err = safetensors.Encode(cw, tensors, md)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

func writeConfig(path string, cfg map[string]any) error {
	text, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("convert: config.json: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	_, err = f.Write(append(text, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: write config.json: %w", err)
	}
	return nil
}

// writeTensors describes outs for the safetensors encoder, each with a
// reader that opens its sources only when the encoder reaches it.
func writeTensors(p *Plan, src Source, outs []Output) []safetensors.WriteTensor {
	ts := make([]safetensors.WriteTensor, len(outs))
	for i := range outs {
		o := &outs[i]
		ts[i] = safetensors.WriteTensor{Name: o.Name, DType: o.DType, Shape: o.Shape,
			Src: &lazyReader{out: o, src: src, allowOverflow: p.AllowOverflow}}
	}
	return ts
}

// Open returns a reader of the output's bytes, read from src as they are
// consumed — for a writer of its own that streams the plan's tensors
// (upcycle's streaming graft). o must be one of p.Outputs.
func (p *Plan) Open(o *Output, src Source) (io.Reader, error) {
	r, err := openOutput(o, src, p.AllowOverflow)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return r, nil
}

// lazyReader opens an output's sources when the encoder first reads it.
type lazyReader struct {
	out           *Output
	src           Source
	allowOverflow bool
	r             io.Reader
}

func (l *lazyReader) Read(b []byte) (int, error) {
	if l.r == nil {
		r, err := openOutput(l.out, l.src, l.allowOverflow)
		if err != nil {
			return 0, err
		}
		l.r = r
	}
	return l.r.Read(b)
}

// fileRange returns the input file region an output is a plain copy of
// (one whole or row-sliced part, same dtype, no copies to check), for a
// copy that the kernel can do without passing the bytes through memory.
func (l *lazyReader) fileRange() (f *os.File, off, n int64, ok bool) {
	o := l.out
	if l.r != nil || o.posGrid > 0 || len(o.Parts) != 1 || len(o.Copies) > 0 || o.Parts[0].DType != o.DType {
		return nil, 0, 0, false
	}
	pt := o.Parts[0]
	sec, err := openPart(l.src, pt.Name, pt.DType, pt.Shape)
	if err != nil {
		return nil, 0, 0, false // the ordinary path reports it
	}
	ra, base, _ := sec.Outer()
	f, ok = ra.(*os.File)
	if !ok {
		return nil, 0, 0, false
	}
	start, size := pt.byteRange()
	return f, base + start, size, true
}

// openOutput returns the stream of an output tensor's bytes.
func openOutput(o *Output, src Source, allowOverflow bool) (io.Reader, error) {
	if o.posGrid > 0 {
		d := int(o.Shape[2])
		v := make([]float32, o.posGrid*o.posGrid*d)
		posembed.SinCosGrid(v, o.posGrid, d)
		raw := make([]byte, len(v)*o.DType.Size())
		if err := dtype.EncodeFloat32(raw, v, o.DType); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", o.Name, err)
		}
		return bytes.NewReader(raw), nil
	}
	readers := make([]io.Reader, 0, len(o.Parts))
	for i, pt := range o.Parts {
		r, err := openPart(src, pt.Name, pt.DType, pt.Shape)
		if err != nil {
			return nil, err
		}
		off, n := pt.byteRange()
		var rd io.Reader = io.NewSectionReader(r, off, n)
		if i == 0 && len(o.Copies) > 0 {
			v := &verifyReader{r: rd, name: pt.Name, dt: pt.DType}
			for _, c := range o.Copies {
				cr, err := openPart(src, c, pt.DType, pt.Shape)
				if err != nil {
					return nil, err
				}
				v.copies = append(v.copies, cr)
			}
			v.copyNames = o.Copies
			rd = v
		}
		if pt.DType != o.DType {
			rd = &castReader{r: rd, from: pt.DType, to: o.DType, name: pt.Name, allowOverflow: allowOverflow}
		}
		readers = append(readers, rd)
	}
	return io.MultiReader(readers...), nil
}

// openPart opens an input tensor, checking it still is what was planned.
func openPart(src Source, name string, dt dtype.DType, shape []int64) (*io.SectionReader, error) {
	t, ok := src.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("input tensor %q is not in the checkpoint", name)
	}
	if t.DType != dt || !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q is %s %v, the plan expected %s %v", t.File, name, t.DType, t.Shape, dt, shape)
	}
	return t.Section()
}

// verifyReader passes its first tensor's bytes through while reading the
// same bytes of every copy and failing at the first difference.
type verifyReader struct {
	r         io.Reader
	name      string
	dt        dtype.DType
	copies    []io.Reader
	copyNames []string
	buf       []byte
	off       int64
}

func (v *verifyReader) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	if n > 0 {
		if cap(v.buf) < n {
			v.buf = make([]byte, n)
		}
		buf := v.buf[:n]
		for i, c := range v.copies {
			if _, cerr := io.ReadFull(c, buf); cerr != nil {
				return 0, fmt.Errorf("tensor %s: %w", v.copyNames[i], cerr)
			}
			if k := firstDiff(b[:n], buf); k >= 0 {
				size := int64(v.dt.Size())
				elem := (v.off + int64(k)) / size
				at := int(elem*size - v.off)
				return 0, fmt.Errorf("tensor %s differs from its copy %s at element %d (%s vs %s): per-block embedders that differ cannot be folded into one",
					v.copyNames[i], v.name, elem, valueAt(buf, at, v.dt), valueAt(b, at, v.dt))
			}
		}
		v.off += int64(n)
	}
	return n, err
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// valueAt formats the element starting at byte at (which may straddle
// the end of a chunk; then only the raw bytes at hand are shown).
func valueAt(b []byte, at int, dt dtype.DType) string {
	size := dt.Size()
	if at < 0 || at+size > len(b) {
		return "…"
	}
	var v [1]float32
	if err := dtype.DecodeFloat32(v[:], b[at:at+size], dt); err != nil {
		return fmt.Sprintf("% x", b[at:at+size])
	}
	return fmt.Sprint(v[0])
}

// castReader converts a stream of one float dtype to another, rounding to
// nearest even; a finite value that becomes ±Inf is an error unless
// allowOverflow.
type castReader struct {
	r             io.Reader
	from, to      dtype.DType
	name          string
	allowOverflow bool
	in            []byte
	vals          []float32
	out, pending  []byte
	elem          int64
	eof           bool
}

func (c *castReader) Read(b []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *castReader) fill() error {
	fs, ts := c.from.Size(), c.to.Size()
	if c.in == nil {
		elems := ioChunk / fs
		c.in, c.vals, c.out = make([]byte, elems*fs), make([]float32, elems), make([]byte, elems*ts)
	}
	n, err := io.ReadFull(c.r, c.in)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		c.eof = true
	case err != nil:
		return err
	}
	if n%fs != 0 {
		return fmt.Errorf("tensor %s: stream ends inside an element", c.name)
	}
	k := n / fs
	vals, out := c.vals[:k], c.out[:k*ts]
	if err := dtype.DecodeFloat32(vals, c.in[:n], c.from); err != nil {
		return fmt.Errorf("tensor %s: %w", c.name, err)
	}
	if err := dtype.EncodeFloat32(out, vals, c.to); err != nil {
		return fmt.Errorf("tensor %s: %w", c.name, err)
	}
	if !c.allowOverflow {
		if j := c.overflow(c.in[:n], vals, out); j >= 0 {
			return fmt.Errorf("tensor %s: element %d = %g does not fit in %s (it would become ±Inf); pass --allow-overflow to store it as ±Inf anyway",
				c.name, c.elem+int64(j), sourceValue(c.in, vals, j, c.from), c.to)
		}
	}
	c.elem += int64(k)
	c.pending = out
	return nil
}

// overflow returns the first element that was finite in the source and is
// infinite in the output, or -1.
func (c *castReader) overflow(in []byte, vals []float32, out []byte) int {
	for j := range vals {
		if !isInf(out, j, c.to) {
			continue
		}
		if v := sourceValue(in, vals, j, c.from); !math.IsInf(v, 0) && !math.IsNaN(v) {
			return j
		}
	}
	return -1
}

// sourceValue is element j of the source exactly (F64 sources are read
// from their bytes: their float32 decoding may itself have overflowed).
func sourceValue(in []byte, vals []float32, j int, from dtype.DType) float64 {
	if from == dtype.F64 {
		return math.Float64frombits(binary.LittleEndian.Uint64(in[8*j:]))
	}
	return float64(vals[j])
}

func isInf(out []byte, j int, d dtype.DType) bool {
	switch d {
	case dtype.F16:
		return binary.LittleEndian.Uint16(out[2*j:])&0x7fff == 0x7c00
	case dtype.BF16:
		return binary.LittleEndian.Uint16(out[2*j:])&0x7fff == 0x7f80
	case dtype.F32:
		return binary.LittleEndian.Uint32(out[4*j:])&0x7fffffff == 0x7f800000
	}
	return false
}

// countingWriter reports progress and moves data in large blocks: the
// encoder's io.CopyN finds ReadFrom and so reads each tensor in 1 MiB
// chunks instead of io.Copy's 32 KiB, or, for a plain copy of an input
// file region, has the kernel copy it (copy_file_range on Linux).
type countingWriter struct {
	w        io.Writer
	bw       *bufio.Writer // w, when it buffers file
	file     *os.File
	done     int64
	total    int64
	progress func(done, total int64)
	buf      []byte
}

// Write passes the encoder's headers through; only tensor bytes, which
// come through ReadFrom, count as progress.
func (c *countingWriter) Write(b []byte) (int, error) { return c.w.Write(b) }

func (c *countingWriter) advance(n int64) {
	c.done += n
	if c.progress != nil {
		c.progress(c.done, c.total)
	}
}

func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if n, ok, err := c.copyRange(r); ok || err != nil {
		return n, err
	}
	if c.buf == nil {
		c.buf = make([]byte, ioChunk)
	}
	var total int64
	for {
		n, err := r.Read(c.buf)
		if n > 0 {
			w, werr := c.w.Write(c.buf[:n])
			total += int64(w)
			c.advance(int64(w))
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// copyRange copies a plain file region with the kernel when r is the
// encoder's limited view of one; ok is false when it cannot (another kind
// of output, another platform, a file system that refuses), before any
// byte is written.
func (c *countingWriter) copyRange(r io.Reader) (int64, bool, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok || c.file == nil {
		return 0, false, nil
	}
	lz, ok := lr.R.(*lazyReader)
	if !ok {
		return 0, false, nil
	}
	// Small tensors go through the buffer: a kernel copy of each would
	// cost a flush and a system call per bias vector.
	if lr.N < ioChunk {
		return 0, false, nil
	}
	src, off, n, ok := lz.fileRange()
	if !ok || n != lr.N {
		return 0, false, nil
	}
	if err := c.bw.Flush(); err != nil {
		return 0, false, err
	}
	var done int64
	for done < n {
		k, err := copyFileRange(c.file, src, off+done, min(n-done, 1<<30))
		if err != nil || k == 0 {
			if done == 0 {
				return 0, false, nil
			}
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return done, true, err
		}
		done += k
		c.advance(k)
	}
	lr.N -= n
	return n, true, nil
}

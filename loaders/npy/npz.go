package npy

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// maxDeflateRatio is DEFLATE's largest possible expansion (a 258-byte
// match costs at least two bits, plus block overhead): a member claiming
// more uncompressed bytes per compressed byte is refused unread, so a
// lying directory cannot make a reader allocate beyond this multiple of
// the file.
const maxDeflateRatio = 1032

// suffix is the member name extension numpy adds to every key.
const suffix = ".npy"

// Archive is an opened .npz file. Members are read on demand; it holds
// the file open until Close.
type Archive struct {
	path    string
	closer  io.Closer
	size    int64
	names   []string
	members map[string]*zip.File
}

// OpenNPZ opens the .npz file at path.
func OpenNPZ(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("npy: %w", err)
	}
	a, err := NewArchive(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	a.closer = f
	return a, nil
}

// NewArchive reads the .npz directory from r, which holds size bytes;
// name is used in errors. Closing the Archive does not close r.
func NewArchive(r io.ReaderAt, size int64, name string) (*Archive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npy: %s: not a zip archive: %w", name, err)
	}
	a := &Archive{path: name, size: size, members: map[string]*zip.File{}}
	for _, zf := range zr.File {
		key, ok := strings.CutSuffix(zf.Name, suffix)
		if !ok {
			continue
		}
		if _, dup := a.members[key]; !dup {
			a.names = append(a.names, key)
		}
		// Python's zipfile, and so np.load, takes the last of
		// duplicate names.
		a.members[key] = zf
	}
	return a, nil
}

// Names lists the arrays in the archive (member names without ".npy"), in
// archive order.
func (a *Archive) Names() []string { return append([]string(nil), a.names...) }

// Close closes the file OpenNPZ opened.
func (a *Archive) Close() error {
	if a.closer == nil {
		return nil
	}
	return a.closer.Close()
}

// Member is one array of an archive, its header read and checked.
type Member struct {
	archive   *Archive
	name      string
	zf        *zip.File
	header    Header
	headerLen int64
}

// Member finds the array name ("arr_0", "mu") and reads its header.
func (a *Archive) Member(name string) (*Member, error) {
	zf, ok := a.members[name]
	if !ok {
		return nil, fmt.Errorf("npy: %s: no array %q (the archive holds %s)", a.path, name, a.listing())
	}
	m := &Member{archive: a, name: name, zf: zf}
	rc, err := m.open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if m.header, m.headerLen, err = ReadHeader(rc, int64(zf.UncompressedSize64)); err != nil {
		return nil, m.errorf("%w", err)
	}
	return m, nil
}

// Read reads the array name whole.
func (a *Archive) Read(name string) (*Array, error) {
	m, err := a.Member(name)
	if err != nil {
		return nil, err
	}
	return m.Read()
}

func (a *Archive) listing() string {
	if len(a.names) == 0 {
		return "no .npy members"
	}
	return strings.Join(a.names, ", ")
}

// Header is the member's array header.
func (m *Member) Header() Header { return m.header }

func (m *Member) errorf(format string, args ...any) error {
	return fmt.Errorf("npy: %s: member %q: "+format, append([]any{m.archive.path, m.name}, args...)...)
}

// open checks the member's directory entry against the file and opens its
// (decompressed) byte stream.
func (m *Member) open() (io.ReadCloser, error) {
	zf := m.zf
	off, err := zf.DataOffset()
	if err != nil {
		return nil, m.errorf("%w", err)
	}
	csize, usize := zf.CompressedSize64, zf.UncompressedSize64
	if off < 0 || off > m.archive.size || csize > uint64(m.archive.size-off) {
		return nil, m.errorf("%d compressed bytes at offset %d extend past the end of the %d-byte file", csize, off, m.archive.size)
	}
	switch zf.Method {
	case zip.Store:
		if csize != usize {
			return nil, m.errorf("stored member declares %d bytes compressed and %d uncompressed", csize, usize)
		}
	case zip.Deflate:
		if usize/maxDeflateRatio > csize {
			return nil, m.errorf("declares %d bytes from %d compressed ones, beyond DEFLATE's %d:1", usize, csize, maxDeflateRatio)
		}
	default:
		return nil, m.errorf("compression method %d is not supported (want 0, stored, or 8, deflate)", zf.Method)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, m.errorf("%w", err)
	}
	return rc, nil
}

// dataReader opens the member positioned at its first data byte.
func (m *Member) dataReader() (io.ReadCloser, error) {
	rc, err := m.open()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, m.headerLen); err != nil {
		rc.Close()
		return nil, m.errorf("skipping the header: %w", noEOF(err))
	}
	return rc, nil
}

// atEnd checks that rc has nothing left; reaching EOF is also what makes
// archive/zip verify the member's size and CRC-32.
func atEnd(rc io.Reader) error {
	var b [1]byte
	n, err := rc.Read(b[:])
	switch {
	case n > 0:
		return errors.New("more bytes than the header declares")
	case err == io.EOF:
		return nil
	case err == nil:
		return atEnd(rc)
	}
	return err
}

// Read reads the whole array.
func (m *Member) Read() (*Array, error) {
	rc, err := m.dataReader()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data := make([]byte, m.header.DataSize())
	if _, err := io.ReadFull(rc, data); err != nil {
		return nil, m.errorf("reading %s data: %w", m.header, noEOF(err))
	}
	if err := atEnd(rc); err != nil {
		return nil, m.errorf("%w", err)
	}
	return &Array{DType: m.header.DType, Shape: m.header.Shape, Data: data}, nil
}

// RowReader streams an array's data in whole rows (slices along the first
// axis, e.g. one image of an [N, H, W, 3] batch).
type RowReader struct {
	m        *Member
	rc       io.ReadCloser
	rowBytes int
	left     int
}

// Rows opens the array for reading row by row.
func (m *Member) Rows() (*RowReader, error) {
	if len(m.header.Shape) == 0 {
		return nil, m.errorf("a 0-d array %s has no rows", m.header)
	}
	row := Header{DType: m.header.DType, Shape: m.header.Shape[1:]}
	rc, err := m.dataReader()
	if err != nil {
		return nil, err
	}
	return &RowReader{m: m, rc: rc, rowBytes: int(row.DataSize()), left: m.header.Shape[0]}, nil
}

// RowBytes is the size of one row in bytes.
func (r *RowReader) RowBytes() int { return r.rowBytes }

// Left is the number of rows not yet read.
func (r *RowReader) Left() int { return r.left }

// Next fills dst with as many whole rows as fit (at most Left) and returns
// how many; after the last row it returns 0, io.EOF. A dst shorter than
// one row is an error. The last row's read verifies the member's CRC.
func (r *RowReader) Next(dst []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	rows := r.left
	if r.rowBytes > 0 {
		rows = min(rows, len(dst)/r.rowBytes)
	}
	if rows == 0 {
		return 0, r.m.errorf("a %d-byte buffer holds no %d-byte row", len(dst), r.rowBytes)
	}
	if _, err := io.ReadFull(r.rc, dst[:rows*r.rowBytes]); err != nil {
		return 0, r.m.errorf("reading rows: %w", noEOF(err))
	}
	r.left -= rows
	if r.left == 0 {
		if err := atEnd(r.rc); err != nil {
			return 0, r.m.errorf("%w", err)
		}
	}
	return rows, nil
}

// Close releases the member's stream.
func (r *RowReader) Close() error { return r.rc.Close() }

// Writer writes the members of an .npz archive one after the other.
type Writer struct {
	zw     *zip.Writer
	method uint16
	cur    *MemberWriter
	names  map[string]bool
}

// NewWriter starts an archive on w: members deflate-compressed
// (np.savez_compressed) when compressed is set, else stored (np.savez).
func NewWriter(w io.Writer, compressed bool) *Writer {
	method := zip.Store
	if compressed {
		method = zip.Deflate
	}
	return &Writer{zw: zip.NewWriter(w), method: method, names: map[string]bool{}}
}

// MemberWriter takes the data bytes of one member, exactly as many as its
// header declares, in pieces of any size.
type MemberWriter struct {
	name string
	w    io.Writer
	left int64
}

// Write appends data to the member; going past its declared size is an
// error.
func (m *MemberWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > m.left {
		return 0, fmt.Errorf("member %q: %d more bytes than its header declares", m.name, int64(len(p))-m.left)
	}
	n, err := m.w.Write(p)
	m.left -= int64(n)
	return n, err
}

// Create starts the member name (written as name.npy) holding an array
// described by h and returns the writer for its data. The previous member
// must be complete.
func (w *Writer) Create(name string, h Header) (*MemberWriter, error) {
	if err := w.finish(); err != nil {
		return nil, err
	}
	if name == "" || w.names[name] {
		return nil, fmt.Errorf("member name %q is empty or already written", name)
	}
	header, err := EncodeHeader(h)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", name, err)
	}
	// A fixed time keeps archives of the same arrays byte-identical.
	zw, err := w.zw.CreateHeader(&zip.FileHeader{Name: name + suffix, Method: w.method,
		Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", name, err)
	}
	if _, err := zw.Write(header); err != nil {
		return nil, fmt.Errorf("member %q: %w", name, err)
	}
	w.names[name] = true
	w.cur = &MemberWriter{name: name, w: zw, left: h.DataSize()}
	return w.cur, nil
}

// Add writes the whole array a as member name.
func (w *Writer) Add(name string, a *Array) error {
	if err := a.check(); err != nil {
		return fmt.Errorf("member %q: %w", name, err)
	}
	mw, err := w.Create(name, a.Header())
	if err != nil {
		return err
	}
	_, err = mw.Write(a.Data)
	return err
}

// finish checks that the open member got all its bytes.
func (w *Writer) finish() error {
	if w.cur != nil && w.cur.left != 0 {
		return fmt.Errorf("member %q: %d data bytes missing", w.cur.name, w.cur.left)
	}
	w.cur = nil
	return nil
}

// Close completes the archive (its directory); it fails when the last
// member is short.
func (w *Writer) Close() error {
	if err := w.finish(); err != nil {
		return err
	}
	return w.zw.Close()
}

// WriteNPZ writes an .npz archive to path atomically: fill adds the
// members (Writer.Add, or Writer.Create and streamed data); if fill or any
// write fails, path is left untouched.
func WriteNPZ(path string, compressed bool, fill func(w *Writer) error) error {
	err := atomicfile.Write(path, func(f io.Writer) error {
		w := NewWriter(f, compressed)
		if err := fill(w); err != nil {
			return err
		}
		return w.Close()
	})
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

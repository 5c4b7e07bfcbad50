package npy

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// images returns an [n, h, w, 3] uint8 batch with distinct rows.
func images(n, h, w int) *Array {
	a := &Array{DType: dtype.U8, Shape: []int{n, h, w, 3}, Data: make([]byte, n*h*w*3)}
	for i := range a.Data {
		a.Data[i] = byte(i*31 + i/(h*w*3))
	}
	return a
}

func TestNPZRoundTrip(t *testing.T) {
	mu := FromFloat64([]int{3}, []float64{1, 2, 3})
	sigma := FromFloat64([]int{3, 3}, []float64{1, 0, 0, 0, 2, 0, 0, 0, 3})
	arr := images(5, 4, 2)
	for _, compressed := range []bool{false, true} {
		t.Run(map[bool]string{false: "stored", true: "deflate"}[compressed], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.npz")
			err := WriteNPZ(path, compressed, func(w *Writer) error {
				if err := w.Add("mu", mu); err != nil {
					return err
				}
				if err := w.Add("sigma", sigma); err != nil {
					return err
				}
				// arr_0 streamed in uneven pieces.
				mw, err := w.Create("arr_0", arr.Header())
				if err != nil {
					return err
				}
				for rest := arr.Data; len(rest) > 0; {
					n := min(len(rest), 37)
					if _, err := mw.Write(rest[:n]); err != nil {
						return err
					}
					rest = rest[n:]
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			z, err := OpenNPZ(path)
			if err != nil {
				t.Fatal(err)
			}
			defer z.Close()
			if got := strings.Join(z.Names(), ","); got != "mu,sigma,arr_0" {
				t.Errorf("names %s", got)
			}
			for name, want := range map[string]*Array{"mu": mu, "sigma": sigma, "arr_0": arr} {
				got, err := z.Read(name)
				if err != nil {
					t.Fatal(err)
				}
				if got.Header().String() != want.Header().String() || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s: read %s, want %s with the same data", name, got.Header(), want.Header())
				}
			}
			checkRows(t, z, "arr_0", arr.Data)
		})
	}
}

// checkRows reads the member in chunks of 1, 2, 3 … rows and compares
// with want.
func checkRows(t *testing.T, z *Archive, name string, want []byte) {
	t.Helper()
	m, err := z.Member(name)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := 1; chunk <= 3; chunk++ {
		r, err := m.Rows()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, chunk*r.RowBytes())
		var got []byte
		for {
			n, err := r.Next(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n*r.RowBytes()]...)
		}
		r.Close()
		if !bytes.Equal(got, want) || r.Left() != 0 {
			t.Errorf("%s in chunks of %d rows: %d bytes read, want %d equal ones", name, chunk, len(got), len(want))
		}
	}
}

func TestWriterErrors(t *testing.T) {
	h := Header{dtype.U8, []int{2, 2}}
	tests := []struct {
		name string
		fill func(w *Writer) error
		want string
	}{
		{"too much data", func(w *Writer) error {
			mw, _ := w.Create("a", h)
			_, err := mw.Write(make([]byte, 5))
			return err
		}, "1 more bytes than its header declares"},
		{"short member then another", func(w *Writer) error {
			mw, _ := w.Create("a", h)
			mw.Write(make([]byte, 3))
			_, err := w.Create("b", h)
			return err
		}, `member "a": 1 data bytes missing`},
		{"short last member", func(w *Writer) error {
			_, err := w.Create("a", h)
			return err
		}, `member "a": 4 data bytes missing`},
		{"duplicate name", func(w *Writer) error {
			w.Add("a", &Array{DType: dtype.U8, Shape: []int{1}, Data: []byte{1}})
			return w.Add("a", &Array{DType: dtype.U8, Shape: []int{1}, Data: []byte{1}})
		}, "already written"},
		{"inconsistent array", func(w *Writer) error {
			return w.Add("a", &Array{DType: dtype.F64, Shape: []int{2}, Data: []byte{1}})
		}, "1 data bytes, want 16"},
		{"unwritable dtype", func(w *Writer) error {
			_, err := w.Create("a", Header{dtype.BF16, []int{1}})
			return err
		}, "no .npy code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.npz")
			err := WriteNPZ(path, false, tt.fill)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("a failed write left %s behind (%v)", path, serr)
			}
		})
	}
}

// zipOf builds a zip in memory with the given members, stored.
func zipOf(t testing.TB, members map[string][]byte, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"a.npy", "b.npy", "c.txt"} {
		data, ok := members[name]
		if !ok {
			continue
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func npyBytes(t testing.TB, a *Array) []byte {
	var b bytes.Buffer
	if err := Encode(&b, a); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// setCentral rewrites field off (relative to the central directory entry
// of the first member) to v.
func setCentral(data []byte, off int, v uint32) []byte {
	out := bytes.Clone(data)
	i := bytes.Index(out, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(out[i+off:], v)
	return out
}

func TestArchiveErrors(t *testing.T) {
	good := npyBytes(t, FromFloat64([]int{4}, []float64{1, 2, 3, 4}))
	stored := zipOf(t, map[string][]byte{"a.npy": good, "c.txt": []byte("x")}, zip.Store)
	deflated := zipOf(t, map[string][]byte{"a.npy": good}, zip.Deflate)
	flipped := bytes.Clone(stored)
	flipped[bytes.Index(flipped, good)+len(good)-1] ^= 1
	const csize, usize = 20, 24 // central directory offsets of the sizes
	tests := []struct {
		name   string
		data   []byte
		member string
		want   string
	}{
		{"not a zip", []byte("hello"), "a", "not a zip archive"},
		{"no such member", stored, "mu", `no array "mu" (the archive holds a)`},
		{"non-npy member hidden", stored, "c.txt", "no array"},
		{"corrupt data (CRC)", flipped, "a", "checksum"},
		{"lying deflate size", setCentral(deflated, usize, 1<<30), "a", "beyond DEFLATE"},
		{"stored sizes disagree", setCentral(stored, usize, uint32(len(good)+8)), "a", "declares"},
		{"past the end", setCentral(setCentral(stored, csize, 1<<30), usize, 1<<30), "a", "extend past the end"},
		{"method", setCentral(stored, 10, 12), "a", "compression method 12"},
		{"short stored member", setCentral(setCentral(stored, csize, uint32(len(good)-8)), usize, uint32(len(good)-8)), "a", "declares more data than the 24 bytes found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, err := NewArchive(bytes.NewReader(tt.data), int64(len(tt.data)), "t.npz")
			if err == nil {
				_, err = z.Read(tt.member)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "t.npz") {
				t.Errorf("error %v, want one naming t.npz and containing %q", err, tt.want)
			}
		})
	}
}

// The fixture's npz files, written by numpy: samples.npz (np.savez,
// stored, zip64 extras) and stats.npz (np.savez_compressed). Re-encoding
// what was read must give back each member's bytes exactly.
func TestFixtureNPZ(t *testing.T) {
	fixtures.Run(t, "fid-inception", func(t *testing.T, c fixtures.Case) {
		for _, key := range []string{"samples", "stats"} {
			cfg, ok := c.Config[key].(map[string]any)
			if !ok {
				t.Fatalf("%s: config.json has no %q object", c.Dir, key)
			}
			name, _ := cfg["file"].(string)
			path := filepath.Join(c.Dir, name)
			raw := rawMembers(t, path)
			z, err := OpenNPZ(path)
			if err != nil {
				t.Fatal(err)
			}
			defer z.Close()
			if len(z.Names()) != len(raw) {
				t.Errorf("%s: names %v, the zip has %d members", name, z.Names(), len(raw))
			}
			for _, member := range z.Names() {
				a, err := z.Read(member)
				if err != nil {
					t.Fatal(err)
				}
				if got := npyBytes(t, a); !bytes.Equal(got, raw[member+".npy"]) {
					t.Errorf("%s: %s: re-encoded %d bytes differ from the member's %d", name, member, len(got), len(raw[member+".npy"]))
				}
				if a.DType == dtype.U8 {
					checkRows(t, z, member, a.Data)
				}
			}
			checkDeclared(t, c, key, cfg, z)
		}
	})
}

// checkDeclared compares the arrays with what config.json declares.
func checkDeclared(t *testing.T, c fixtures.Case, key string, cfg map[string]any, z *Archive) {
	t.Helper()
	want := map[string]dtype.DType{"uint8": dtype.U8, "float64": dtype.F64}[cfg["dtype"].(string)]
	switch key {
	case "samples":
		m, err := z.Member(cfg["key"].(string))
		if err != nil {
			t.Fatal(err)
		}
		shape := cfg["shape"].([]any)
		h := m.Header()
		if h.DType != want || len(h.Shape) != len(shape) || h.Shape[len(shape)-1] != 3 {
			t.Fatalf("%s: arr_0 is %s, config says %v %v", c.Dir, h, cfg["dtype"], shape)
		}
		for i, d := range shape {
			if float64(h.Shape[i]) != d.(float64) {
				t.Errorf("%s: arr_0 is %s, config says %v", c.Dir, h, shape)
			}
		}
	case "stats":
		dim := int(cfg["dim"].(float64))
		for _, k := range cfg["keys"].([]any) {
			m, err := z.Member(k.(string))
			if err != nil {
				t.Fatal(err)
			}
			h := m.Header()
			if h.DType != want || h.Shape[0] != dim || h.NumElements() != map[string]int{"mu": dim, "sigma": dim * dim}[k.(string)] {
				t.Errorf("%s: %s is %s, config says %v of dimension %d", c.Dir, k, h, cfg["dtype"], dim)
			}
		}
	}
}

// rawMembers returns the decompressed bytes of every member.
func rawMembers(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = b
	}
	return out
}

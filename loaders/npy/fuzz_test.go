package npy

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

func seedArrays() []*Array {
	return []*Array{
		FromFloat64([]int{2, 2}, []float64{1, 2, 3, 4}),
		FromFloat32([]int{3}, []float32{1, 2, 3}),
		images(2, 2, 1),
		{DType: dtype.I64, Data: make([]byte, 8)},
	}
}

// FuzzReadNPY decodes arbitrary bytes: no panic, and whatever is accepted
// survives an encode/decode round trip unchanged.
func FuzzReadNPY(f *testing.F) {
	for _, a := range seedArrays() {
		f.Add(npyBytes(f, a))
	}
	f.Add(file(2, "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }", []byte{1, 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Decode(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		b := npyBytes(t, a)
		back, err := Decode(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", a.Header(), err)
		}
		if back.Header().String() != a.Header().String() || !bytes.Equal(back.Data, a.Data) {
			t.Fatalf("round trip changed %s into %s", a.Header(), back.Header())
		}
	})
}

// FuzzReadNPZ opens arbitrary bytes as an archive and reads every member
// whole and row by row: no panic, no allocation beyond DEFLATE's bound,
// and both reads agree.
func FuzzReadNPZ(f *testing.F) {
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		members := map[string][]byte{}
		for i, a := range seedArrays()[:2] {
			members[[]string{"a.npy", "b.npy"}[i]] = npyBytes(f, a)
		}
		f.Add(zipOf(f, members, method))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		z, err := NewArchive(bytes.NewReader(data), int64(len(data)), "fuzz.npz")
		if err != nil {
			return
		}
		for _, name := range z.Names() {
			m, err := z.Member(name)
			if err != nil {
				continue
			}
			whole, err := m.Read()
			if err != nil {
				continue
			}
			r, err := m.Rows()
			if err != nil {
				if len(m.Header().Shape) > 0 {
					t.Fatalf("%s: Read works, Rows fails: %v", name, err)
				}
				continue
			}
			var got []byte
			buf := make([]byte, max(r.RowBytes(), 1))
			for {
				n, err := r.Next(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: Read works, Next fails: %v", name, err)
				}
				got = append(got, buf[:n*r.RowBytes()]...)
			}
			r.Close()
			if !bytes.Equal(got, whole.Data) {
				t.Fatalf("%s: rows and whole read differ", name)
			}
		}
	})
}

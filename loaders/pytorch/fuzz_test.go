package pytorch

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzStorageBytes is the size every storage record has in FuzzUnpickle.
const fuzzStorageBytes = 1 << 12

var fuzzFile = bytes.NewReader(make([]byte, fuzzStorageBytes))

// pickleSeeds returns data.pkl of the torch-written test files and of the
// bad-input corpus.
func pickleSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	addZip := func(data []byte) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, zf := range zr.File {
			if strings.HasSuffix(zf.Name, "/data.pkl") {
				rc, err := zf.Open()
				if err != nil {
					continue
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err == nil {
					seeds = append(seeds, b)
				}
			}
		}
	}
	names, _ := filepath.Glob(filepath.Join(torchDir, "*.pt"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			addZip(b)
		}
	}
	for _, tc := range badCorpus(t) {
		addZip(tc.data)
	}
	return seeds
}

// FuzzUnpickle runs the pickle interpreter and state-dict selection on
// arbitrary bytes, with every storage key of up to 4 bytes resolving to a
// 4 KiB record, and reads every tensor it accepts.
func FuzzUnpickle(f *testing.F) {
	for _, s := range pickleSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lookup := func(key string) (record, error) {
			if len(key) > 4 {
				return record{}, errors.New("no such record")
			}
			return record{name: "archive/data/" + key, size: fuzzStorageBytes}, nil
		}
		file, err := parse("archive/data.pkl", data, lookup)
		if err != nil {
			return
		}
		for _, tt := range file.Tensors {
			tt.Contiguous()
			off, n, ok := tt.ByteRange()
			if ok && (off < 0 || n < 0 || off+n > fuzzStorageBytes) {
				t.Fatalf("tensor %q: ByteRange %d+%d outside the %d-byte storage", tt.Name, off, n, fuzzStorageBytes)
			}
			// A stride-0 view too large to materialise is refused on
			// read, by design; anything else accepted must read.
			if _, err := tt.ReadBytes(fuzzFile); err != nil && !errors.Is(err, errExpand) {
				t.Fatalf("accepted tensor %q does not read: %v", tt.Name, err)
			}
		}
	})
}

// FuzzOpen runs Open's zip and legacy handling and parsing on arbitrary
// file bytes.
func FuzzOpen(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join(torchDir, "*.pt"))
	legacy, _ := filepath.Glob(filepath.Join("testdata", "*.pth"))
	for _, n := range append(names, legacy...) {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(b)
		}
	}
	for _, tc := range badCorpus(f) {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		file, err := open(r, int64(len(data)), "fuzz.pt")
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		for _, tt := range file.Tensors {
			if _, err := tt.ReadBytes(r); err != nil {
				t.Fatalf("accepted tensor %q does not read: %v", tt.Name, err)
			}
		}
	})
}

//go:build !unix

package mmapfile

import (
	"io"
	"os"
)

// Without mmap the file is read once into memory; callers see the same API.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

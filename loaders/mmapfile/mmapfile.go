// Package mmapfile maps whole files read-only into memory, so that tensor
// data can be handed out without copying and pages are read only when used.
package mmapfile

import (
	"fmt"
	"os"
)

// Map is a read-only view of a file's bytes. Writing to Data faults on
// platforms where it is a real memory map.
type Map struct {
	Data  []byte
	unmap func() error
}

// Open maps the first size bytes of f read-only. A size of 0 yields an empty
// Map (mmap rejects empty ranges).
func Open(f *os.File, size int64) (*Map, error) {
	if size == 0 {
		return &Map{}, nil
	}
	if size < 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("mmap %s: size %d out of range", f.Name(), size)
	}
	data, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return &Map{Data: data, unmap: unmap}, nil
}

// Close releases the mapping; Data must not be used afterwards.
func (m *Map) Close() error {
	if m == nil || m.unmap == nil {
		return nil
	}
	err := m.unmap()
	m.Data, m.unmap = nil, nil
	return err
}

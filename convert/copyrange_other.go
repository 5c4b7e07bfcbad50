//go:build !linux

package convert

import (
	"errors"
	"os"
)

// copyFileRange is Linux's copy_file_range; elsewhere conversions copy
// through memory.
func copyFileRange(dst, src *os.File, off, n int64) (int64, error) {
	return 0, errors.ErrUnsupported
}

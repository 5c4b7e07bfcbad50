//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package progress

import "os"

// isTerminal falls back to "is a character device" where no termios query
// is available.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

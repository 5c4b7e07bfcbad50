package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckWritable makes sure a file can be created at path: its folder exists
// and takes new files, and path is not itself a folder. flag names the option in the message,
// so that a bad output path fails before minutes of work rather than after.
func CheckWritable(flag, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a folder, want a file name", flag, path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: folder %s does not exist", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a folder", flag, path, dir)
	}
	probe, err := os.CreateTemp(dir, ".dcdit-probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %s: folder %s is not writable: %w", flag, path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

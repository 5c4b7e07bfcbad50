// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a partial write: the data goes to a
// temporary file in the same folder, is fsynced, and is renamed into place.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates path atomically with the bytes that fill writes. If fill or
// any step fails, the temporary file is removed and path is left untouched.
func Write(path string, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err = fill(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes the rename durable where the platform allows it; failure
// only weakens durability, never correctness, so it is not reported.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// WriteDir creates the folder path atomically with what fill writes into
// the temporary folder it is given (files fill writes atomically or not:
// nobody sees the folder until it is complete). An existing folder at path
// is replaced: it is moved aside, the new one renamed into place, and the
// old one removed, so that a reader sees the old folder or the new one.
// If fill or any step fails, the temporary folder is removed and path is
// left as it was.
func WriteDir(path string, fill func(dir string) error) (err error) {
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err = fill(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(tmp)
	var old string
	if _, serr := os.Stat(path); serr == nil {
		old = tmp + ".old"
		if err = os.Rename(path, old); err != nil {
			return fmt.Errorf("write %s: moving the old folder aside: %w", path, err)
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		if old != "" {
			os.Rename(old, path)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(parent)
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}

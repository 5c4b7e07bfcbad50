package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		fill func(w io.Writer) error
		want string // content of path afterwards
		fail bool
	}{
		{"failure keeps the old file", func(w io.Writer) error {
			w.Write([]byte("partial"))
			return errors.New("disk full")
		}, "old", true},
		{"success replaces it", func(w io.Writer) error {
			_, err := w.Write([]byte("new"))
			return err
		}, "new", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Write(path, c.fill)
			if (err != nil) != c.fail {
				t.Fatalf("err = %v, want failure %v", err, c.fail)
			}
			got, _ := os.ReadFile(path)
			if string(got) != c.want {
				t.Errorf("content %q, want %q", got, c.want)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestWriteIntoMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	err := Write(path, func(w io.Writer) error { return nil })
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error naming the path", err)
	}
}

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

// WriteDir creates a folder, replaces an existing one whole, and leaves
// the old one in place when fill fails.
func TestWriteDir(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "model")
	write := func(name, text string) func(string) error {
		return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
	}
	if err := WriteDir(path, write("a", "1")); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(path, write("b", "2")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path, "a")); !os.IsNotExist(err) {
		t.Errorf("the replaced folder's file a is still there: %v", err)
	}
	boom := errors.New("boom")
	if err := WriteDir(path, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failing fill: %v, want boom", err)
	}
	if b, err := os.ReadFile(filepath.Join(path, "b")); err != nil || string(b) != "2" {
		t.Errorf("after a failed replacement: %q, %v; want the previous folder", b, err)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the parent holds %d entries, want the folder alone (no temporaries)", len(entries))
	}
}

package textenc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadPrompts(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
		err        string
	}{
		{"lines", "a red disc\nstripes\n", []string{"a red disc", "stripes"}, ""},
		{"bom and crlf, no final newline", "\xef\xbb\xbfa\r\nb", []string{"a", "b"}, ""},
		{"blank line", "a\n  \nb\n", nil, ":2: empty prompt"},
		{"not utf-8", "a\n\xff\n", nil, ":2: not valid UTF-8"},
		{"empty file", "", nil, "no prompts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.txt")
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPrompts(path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

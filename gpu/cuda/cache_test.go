package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheKey checks that the key is deterministic and changes with every
// part, including where the parts split.
func TestCacheKey(t *testing.T) {
	base := []string{"k.cu", "__global__ void f(){}", "--gpu-architecture=sm_90", "cubin", "nvrtc 13.0"}
	k0 := cacheKey(base...)
	if k0 != cacheKey(base...) {
		t.Fatal("cacheKey is not deterministic")
	}
	if len(k0) != 64 {
		t.Errorf("key %q is not a hex SHA-256", k0)
	}
	for i := range base {
		changed := append([]string(nil), base...)
		changed[i] += "x"
		if cacheKey(changed...) == k0 {
			t.Errorf("changing part %d (%q) left the key unchanged", i, base[i])
		}
	}
	if cacheKey("ab", "c") == cacheKey("a", "bc") {
		t.Error(`cacheKey("ab", "c") == cacheKey("a", "bc")`)
	}
}

// TestCacheRoundTrip checks write then read, a miss, overwriting, and that
// no temporary file is left behind.
func TestCacheRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub", "cuda") // created on first write
	key := cacheKey("x")
	if got, err := readCache(dir, key); got != nil || err != nil {
		t.Fatalf("read of a missing entry = %v, %v; want nil, nil", got, err)
	}
	for _, payload := range [][]byte{[]byte("first image"), []byte("second, longer image\x00")} {
		if err := writeCache(dir, key, payload); err != nil {
			t.Fatal(err)
		}
		got, err := readCache(dir, key)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("read = %q, %v; want %q", got, err, payload)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != key+".bin" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("cache folder holds %q, want only %s.bin", names, key)
	}
}

// TestCacheCorrupt checks that every kind of damaged entry is reported as
// corrupt (so Compile recompiles), and that a rewrite repairs it.
func TestCacheCorrupt(t *testing.T) {
	payload := []byte("a compiled image")
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"empty", func(b []byte) []byte { return nil }},
		{"truncated header", func(b []byte) []byte { return b[:10] }},
		{"header only", func(b []byte) []byte { return b[:len(cacheMagic)+32] }},
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-3] }},
		{"bad magic", func(b []byte) []byte { b[0] ^= 0xff; return b }},
		{"flipped payload byte", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"flipped checksum byte", func(b []byte) []byte { b[len(cacheMagic)] ^= 1; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := cacheKey(tc.name)
			if err := writeCache(dir, key, payload); err != nil {
				t.Fatal(err)
			}
			p := cachePath(dir, key)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readCache(dir, key)
			if got != nil || !errors.Is(err, errCacheCorrupt) {
				t.Fatalf("read of a damaged entry = %q, %v; want nil, errCacheCorrupt", got, err)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			if err := writeCache(dir, key, payload); err != nil {
				t.Fatal(err)
			}
			if got, err := readCache(dir, key); err != nil || !bytes.Equal(got, payload) {
				t.Errorf("after rewrite: %q, %v", got, err)
			}
		})
	}
}

// TestCacheDirOption checks how Options.CacheDir resolves.
func TestCacheDirOption(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-test-cache")
	for _, tc := range []struct{ opt, want string }{
		{"off", ""},
		{"", filepath.Join("/tmp/xdg-test-cache", "dcdit", "cuda")},
		{"/some/where", "/some/where"},
	} {
		got, err := cacheDir(tc.opt)
		if err != nil || got != tc.want {
			t.Errorf("cacheDir(%q) = %q, %v; want %q", tc.opt, got, err, tc.want)
		}
	}
}

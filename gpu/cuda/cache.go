package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The cache file layout: cacheMagic, then the SHA-256 of the payload, then
// the payload (a cubin or NUL-terminated PTX). The checksum catches a file
// truncated or damaged after it was renamed into place (a disk fault, a
// hand edit); the atomic rename already rules out half-written files.
const cacheMagic = "DCDITCU1"

// errCacheCorrupt marks a cache entry that exists but cannot be trusted.
var errCacheCorrupt = errors.New("corrupt cache entry")

// cacheDir resolves Options.CacheDir: "off" disables the cache, "" selects
// os.UserCacheDir()/dcdit/cuda. A machine without a user cache folder (no
// $HOME, no $XDG_CACHE_HOME) runs without the cache: it only saves time.
func cacheDir(opt string) (string, error) {
	switch opt {
	case "off":
		return "", nil
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", nil
		}
		return filepath.Join(base, "dcdit", "cuda"), nil
	}
	return opt, nil
}

// cacheKey names the compiled image of src under the given options for the
// given target and compiler: any change to one of them is a new entry.
// Every part is length-prefixed so that no two different tuples collide by
// concatenation.
func cacheKey(parts ...string) string {
	h := sha256.New()
	h.Write([]byte("dcdit-cuda-cache-v1"))
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%d:", len(p))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cachePath is the file of key under dir.
func cachePath(dir, key string) string { return filepath.Join(dir, key+".bin") }

// readCache returns the payload stored under key, nil and no error when
// there is none, or errCacheCorrupt (wrapped with the path) when the entry
// fails its checks.
func readCache(dir, key string) ([]byte, error) {
	p := cachePath(dir, key)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: kernel cache: %w", err)
	}
	hdr := len(cacheMagic) + sha256.Size
	if len(data) <= hdr || string(data[:len(cacheMagic)]) != cacheMagic {
		return nil, fmt.Errorf("cuda: kernel cache %s: %w: bad header (%d bytes)", p, errCacheCorrupt, len(data))
	}
	payload := data[hdr:]
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], data[len(cacheMagic):hdr]) {
		return nil, fmt.Errorf("cuda: kernel cache %s: %w: checksum mismatch", p, errCacheCorrupt)
	}
	return payload, nil
}

// writeCache stores payload under key atomically: a temporary file in the
// same folder, synced, then renamed over the entry, so a reader (another
// process compiling the same kernels) sees the old entry, none, or the whole
// new one.
func writeCache(dir, key string, payload []byte) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cuda: kernel cache: %w", err)
	}
	f, err := os.CreateTemp(dir, key+".tmp-*")
	if err != nil {
		return fmt.Errorf("cuda: kernel cache: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum := sha256.Sum256(payload)
	for _, b := range [][]byte{[]byte(cacheMagic), sum[:], payload} {
		if _, err = f.Write(b); err != nil {
			return fmt.Errorf("cuda: kernel cache: write %s: %w", f.Name(), err)
		}
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("cuda: kernel cache: sync %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("cuda: kernel cache: close %s: %w", f.Name(), err)
	}
	if err = os.Rename(f.Name(), cachePath(dir, key)); err != nil {
		return fmt.Errorf("cuda: kernel cache: %w", err)
	}
	return nil
}

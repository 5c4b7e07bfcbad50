package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tempInfix separates a target's name from os.CreateTemp's random suffix
// in the temporary files Write makes: ".NAME.tmp-DIGITS".
const tempInfix = ".tmp-"

// TempTarget reports whether name (a base name) is one of the temporary
// files Write makes, and for which target: ".model.safetensors.tmp-123"
// is model.safetensors's. Only that exact shape counts, so that cleaning
// up never touches a file Write did not make.
func TempTarget(name string) (target string, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", false
	}
	i := strings.LastIndex(name, tempInfix)
	if i <= 1 {
		return "", false
	}
	suffix := name[i+len(tempInfix):]
	if suffix == "" {
		return "", false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name[1:i], true
}

// RemoveTemps removes from dir the temporary files that an interrupted
// Write left behind (a kill between creating and renaming one), for the
// targets match accepts (nil: every target). It returns the paths it
// removed. Call it only on a folder no other process is writing into (see
// Lock): a live writer's temporary file has the same name.
func RemoveTemps(dir string, match func(target string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		target, ok := TempTarget(e.Name())
		if !ok || !e.Type().IsRegular() || (match != nil && !match(target)) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("clean %s: %w", dir, err)
		}
		removed = append(removed, path)
	}
	return removed, nil
}

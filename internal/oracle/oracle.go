// Package oracle checks the safetensors files dcdit writes with an
// independent reader, github.com/nlpodyssey/safetensors: each file must
// be accepted by it, and every tensor must have the same name, dtype,
// shape and bytes there as in dcdit's own reader, the metadata the same
// entries. It serves tests only: the product reads with loaders/safetensors,
// which knows the F8 types that library lacks and names the file and
// tensor in its errors.
package oracle

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nst "github.com/nlpodyssey/safetensors"

	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Check compares path as both readers see it and returns what differs.
// A file holding a dtype the independent reader does not know (F8_E4M3,
// F8_E5M2) cannot be checked: it returns ErrUnknownDType.
func Check(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	theirs, err := nst.Deserialize(data)
	if err != nil {
		if strings.Contains(err.Error(), "F8_") {
			return fmt.Errorf("%s: %w: %v", path, ErrUnknownDType, err)
		}
		return fmt.Errorf("%s: the independent reader refuses it: %w", path, err)
	}
	ours, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("%s: dcdit's reader refuses it: %w", path, err)
	}
	defer ours.Close()
	var diff []string
	names := theirs.Names()
	slices.Sort(names)
	var mine []string
	for _, t := range ours.Tensors() {
		mine = append(mine, t.Name)
	}
	slices.Sort(mine)
	if !slices.Equal(names, mine) {
		return fmt.Errorf("%s: tensors differ: independent %d %v…, dcdit %d", path, len(names), names[:min(3, len(names))], len(mine))
	}
	for _, info := range ours.Tensors() {
		tv, _ := theirs.Tensor(info.Name)
		if tv.DType().String() != info.DType.String() {
			diff = append(diff, fmt.Sprintf("%s: dtype %s vs %s", info.Name, tv.DType(), info.DType))
		}
		shape := make([]int64, len(tv.Shape()))
		for i, d := range tv.Shape() {
			shape[i] = int64(d)
		}
		if !slices.Equal(shape, info.Shape) {
			diff = append(diff, fmt.Sprintf("%s: shape %v vs %v", info.Name, shape, info.Shape))
		}
		t, _ := ours.Tensor(info.Name)
		b, err := t.Bytes()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, info.Name, err)
		}
		if !bytes.Equal(b, tv.Data()) {
			diff = append(diff, fmt.Sprintf("%s: bytes differ", info.Name))
		}
	}
	_, header, _ := nst.ReadMetadata(data) // Deserialize read it already
	if md := header.Metadata(); !maps.Equal(md, ours.Metadata()) && (len(md) > 0 || len(ours.Metadata()) > 0) {
		diff = append(diff, fmt.Sprintf("metadata: %d entries vs %d", len(md), len(ours.Metadata())))
	}
	if len(diff) > 0 {
		return fmt.Errorf("%s: the readers disagree: %s", path, strings.Join(diff, "; "))
	}
	return nil
}

// ErrUnknownDType marks a file the independent reader cannot read because
// of a dtype it does not know.
var ErrUnknownDType = errors.New("a dtype github.com/nlpodyssey/safetensors does not know")

// CheckTree runs Check on every .safetensors file under dir, failing tb
// on each disagreement and when there is no file at all; it returns how
// many files it checked. A file with a dtype the independent reader does
// not know is logged, not failed.
func CheckTree(tb testing.TB, dir string) int {
	tb.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".safetensors") {
			return err
		}
		n++
		if err := Check(path); errors.Is(err, ErrUnknownDType) {
			tb.Logf("not checked: %v", err)
		} else if err != nil {
			tb.Error(err)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if n == 0 {
		tb.Fatalf("oracle: no .safetensors file under %s", dir)
	}
	return n
}

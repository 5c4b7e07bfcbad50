package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// IndexSuffix ends the name of a sharded checkpoint's index file
// (diffusion_pytorch_model.safetensors.index.json, model.safetensors.index.json).
const IndexSuffix = ".safetensors.index.json"

// Index is a parsed *.safetensors.index.json.
type Index struct {
	Path string
	// TotalSize is metadata.total_size (the sum of tensor bytes, not of file
	// sizes), or -1 when the index does not state it.
	TotalSize int64
	// Metadata holds every metadata entry, total_size included.
	Metadata map[string]any
	// WeightMap maps tensor name to shard file name (relative to the index).
	WeightMap map[string]string
}

// Shards lists the distinct shard file names of the weight map, sorted.
func (ix *Index) Shards() []string {
	set := make(map[string]bool)
	for _, s := range ix.WeightMap {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ReadIndex parses and checks an index file: a JSON object with a
// weight_map of tensor name to a shard file name in the same folder, each
// name at most once.
func ReadIndex(path string) (*Index, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	fail := func(format string, args ...any) error {
		return &FormatError{File: path, Msg: fmt.Sprintf(format, args...)}
	}
	var raw struct {
		Metadata  map[string]any  `json:"metadata"`
		WeightMap json.RawMessage `json:"weight_map"`
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fail("index is not a JSON object with metadata and weight_map: %v", err)
	}
	if raw.WeightMap == nil {
		return nil, fail("index has no weight_map")
	}
	wm, err := decodeWeightMap(raw.WeightMap)
	if err != nil {
		return nil, fail("weight_map: %v", err)
	}
	ix := &Index{Path: path, TotalSize: -1, Metadata: raw.Metadata, WeightMap: wm}
	if v, ok := raw.Metadata["total_size"]; ok {
		num, ok := v.(json.Number)
		n, err := num.Int64()
		if !ok || err != nil || n < 0 {
			return nil, fail("metadata.total_size is %v, want a non-negative integer", v)
		}
		ix.TotalSize = n
	}
	return ix, nil
}

// decodeWeightMap reads the weight_map object token by token so that a
// tensor listed twice is caught (a plain map decode keeps only the last).
func decodeWeightMap(text []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object of tensor name to shard file")
	}
	wm := make(map[string]string)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := tok.(string) // object keys are always strings
		var shard string
		if err := dec.Decode(&shard); err != nil {
			return nil, fmt.Errorf("tensor %.200q: shard must be a file name string: %v", name, err)
		}
		if prev, dup := wm[name]; dup {
			return nil, fmt.Errorf("tensor %.200q is listed twice (in %.200q and %.200q)", name, prev, shard)
		}
		// Control characters are refused too: the name is printed in
		// messages that must stay on one line.
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) ||
			strings.ContainsFunc(shard, unicode.IsControl) {
			return nil, fmt.Errorf("tensor %.200q: shard %.200q is not a plain file name in the index's folder", name, shard)
		}
		wm[name] = shard
	}
	return wm, nil
}

// Sharded is a checkpoint split over several safetensors files and tied
// together by an index.
type Sharded struct {
	Index  *Index
	Shards []*File // in Index.Shards() order
	// Warnings are inconsistencies that do not stop loading (a total_size
	// that disagrees with the tensors).
	Warnings []string

	byName map[string]*Tensor
}

// OpenSharded opens the index at path and every shard it names, and checks
// that they agree: every shard exists and is valid, every indexed tensor is
// in the shard the index names, no tensor is in two shards, and no shard
// holds a tensor the index does not list.
func OpenSharded(path string) (_ *Sharded, err error) {
	ix, err := ReadIndex(path)
	if err != nil {
		return nil, err
	}
	s := &Sharded{Index: ix, byName: make(map[string]*Tensor, len(ix.WeightMap))}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dir := filepath.Dir(path)
	where := make(map[string]string, len(ix.WeightMap)) // tensor -> shard that holds it
	var total int64
	for _, name := range ix.Shards() {
		shardPath := filepath.Join(dir, name)
		if _, err := os.Stat(shardPath); err != nil {
			return nil, &FormatError{File: path, Msg: fmt.Sprintf("shard %s named by the index is missing (%d tensors are indexed there)", name, countIn(ix.WeightMap, name))}
		}
		f, err := Open(shardPath)
		if err != nil {
			return nil, err
		}
		s.Shards = append(s.Shards, f)
		for _, t := range f.Tensors() {
			if other, dup := where[t.Name]; dup {
				return nil, &FormatError{File: path, Tensor: t.Name, Msg: fmt.Sprintf("found in two shards, %s and %s", other, name)}
			}
			where[t.Name] = name
			total += t.Size()
			want, indexed := ix.WeightMap[t.Name]
			if !indexed {
				return nil, &FormatError{File: path, Tensor: t.Name, Msg: fmt.Sprintf("is in shard %s but not in the index's weight_map", name)}
			}
			if want != name {
				return nil, &FormatError{File: path, Tensor: t.Name, Msg: fmt.Sprintf("is indexed in %s but found in %s", want, name)}
			}
			s.byName[t.Name], _ = f.Tensor(t.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ix.WeightMap)) {
		if _, ok := where[name]; !ok {
			msg := fmt.Sprintf("is indexed in %s but that shard does not hold it", ix.WeightMap[name])
			if other := findUnindexed(dir, ix, name); other != "" {
				msg = fmt.Sprintf("is indexed in %s but found in %s", ix.WeightMap[name], other)
			}
			return nil, &FormatError{File: path, Tensor: name, Msg: msg}
		}
	}
	if ix.TotalSize >= 0 && ix.TotalSize != total {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s: metadata.total_size is %d but the shards' tensors hold %d bytes", filepath.Base(path), ix.TotalSize, total))
	}
	return s, nil
}

// findUnindexed looks for tensor in the folder's safetensors files that the
// index does not name, to say where a misindexed tensor really is.
func findUnindexed(dir string, ix *Index, tensor string) string {
	named := make(map[string]bool)
	for _, s := range ix.Shards() {
		named[s] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, p := range files {
		if named[filepath.Base(p)] {
			continue
		}
		f, err := Open(p)
		if err != nil {
			continue
		}
		_, ok := f.Tensor(tensor)
		f.Close()
		if ok {
			return filepath.Base(p)
		}
	}
	return ""
}

func countIn(wm map[string]string, shard string) int {
	n := 0
	for _, s := range wm {
		if s == shard {
			n++
		}
	}
	return n
}

// Tensor returns a lazy handle to the named tensor in whichever shard holds it.
func (s *Sharded) Tensor(name string) (*Tensor, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// Close closes every shard.
func (s *Sharded) Close() error {
	var errs []error
	for _, f := range s.Shards {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// ShardName is the file name of shard i (1-based) of n for a base name such
// as "diffusion_pytorch_model", following the Hugging Face pattern
// base-00001-of-00003.safetensors.
func ShardName(base string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.safetensors", base, i, n)
}

// WriteSharded writes tensors into dir as base.safetensors when they fit in
// one shard of maxShardBytes, or else as numbered shards filled greedily in
// the given order (a tensor larger than the limit gets a shard of its own)
// plus base.safetensors.index.json, written last. Each file is written
// atomically. metadata goes into every shard's __metadata__. It returns the
// path of the index (or of the single file).
func WriteSharded(dir, base string, tensors []WriteTensor, maxShardBytes int64, metadata map[string]string) (string, error) {
	_, sizes, err := plan(tensors)
	if err != nil {
		return "", fmt.Errorf("safetensors: %s: %w", base, err)
	}
	groups := GroupShards(sizes, maxShardBytes)
	if len(groups) <= 1 {
		path := filepath.Join(dir, base+".safetensors")
		return path, Write(path, tensors, metadata)
	}
	wm := make(map[string]string, len(tensors))
	var total int64
	for gi, g := range groups {
		name := ShardName(base, gi+1, len(groups))
		shard := make([]WriteTensor, 0, len(g))
		for _, i := range g {
			shard = append(shard, tensors[i])
			wm[tensors[i].Name] = name
			total += sizes[i]
		}
		if err := Write(filepath.Join(dir, name), shard, metadata); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, base+IndexSuffix)
	if err := WriteIndex(path, wm, total); err != nil {
		return "", err
	}
	return path, nil
}

// WriteIndex writes a sharded checkpoint's index atomically, in the
// Hugging Face form (metadata.total_size and a sorted weight_map).
func WriteIndex(path string, weightMap map[string]string, totalSize int64) error {
	index := struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]any{"total_size": totalSize}, weightMap}
	text, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return err
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(append(text, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// GroupShards splits tensor indices into consecutive groups of at most
// limit bytes each, filled greedily in order (a single oversized tensor
// forms its own group), as the Hugging Face sharding does.
func GroupShards(sizes []int64, limit int64) [][]int {
	var groups [][]int
	var cur []int
	var curSize int64
	for i, n := range sizes {
		if len(cur) > 0 && curSize+n > limit {
			groups = append(groups, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, i)
		curSize += n
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

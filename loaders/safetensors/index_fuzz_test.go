package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// indexSeeds are the shard indexes under testdata: the valid sharded
// checkpoints and the malformed ones of the bad-input corpus.
func indexSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, pattern := range []string{
		"../../testdata/checkpoints/*/*" + IndexSuffix,
		"../../testdata/checkpoints/*/*/*" + IndexSuffix,
		"../../testdata/bad/*/*" + IndexSuffix,
	} {
		names, err := filepath.Glob(pattern)
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				tb.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		tb.Fatal("no shard index under testdata")
	}
	return seeds
}

// FuzzReadIndex parses arbitrary bytes as a *.safetensors.index.json. An
// index is accepted only with shard names that stay in its folder and a
// non-negative total size; every rejection is a FormatError naming the
// file, in one bounded line.
func FuzzReadIndex(f *testing.F) {
	for _, s := range indexSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"weight_map": {"a": "../x.safetensors"}}`))
	f.Add([]byte(`{"metadata": {"total_size": -1}, "weight_map": {}}`))
	// Regression: a shard name holding a newline made a two-line error.
	f.Add([]byte(`{"weight_map": {"a": "x\ny.safetensors", "a": "z.safetensors"}}`))
	path := filepath.Join(f.TempDir(), "model"+IndexSuffix)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := ReadIndex(path)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error is not a FormatError naming the file: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans several lines: %q", err)
			}
			return
		}
		if ix.TotalSize < -1 {
			t.Fatalf("accepted total_size %d", ix.TotalSize)
		}
		for name, shard := range ix.WeightMap {
			if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, "/\\\n\r") || filepath.Base(shard) != shard {
				t.Fatalf("tensor %q: accepted shard %q outside the index's folder", name, shard)
			}
		}
		if len(ix.Shards()) > len(ix.WeightMap) {
			t.Fatalf("%d shards for %d tensors", len(ix.Shards()), len(ix.WeightMap))
		}
	})
}

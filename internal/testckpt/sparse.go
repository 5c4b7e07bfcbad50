package testckpt

import (
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// WriteSparseSharded writes the tensors of exp as a sharded safetensors
// checkpoint in dir whose headers are real and whose data are holes: the
// files have their full length but take almost no disk space, so header-only
// work can be tested at full model scale. It returns the index path.
func WriteSparseSharded(dir, base string, exp arch.Expected, dt dtype.DType, maxShardBytes int64) (string, error) {
	tensors := make([]safetensors.WriteTensor, len(exp))
	for i, name := range exp.Names() {
		tensors[i] = safetensors.WriteTensor{Name: name, DType: dt, Shape: exp.Shape(i)}
	}
	return WriteSparseTensors(dir, base, tensors, maxShardBytes)
}

// WriteSparseTensors is WriteSparseSharded for a list of tensors (names,
// dtypes and shapes; their data are left as holes).
func WriteSparseTensors(dir, base string, tensors []safetensors.WriteTensor, maxShardBytes int64) (string, error) {
	sizes := make([]int64, len(tensors))
	for i, t := range tensors {
		sizes[i] = int64(t.DType.Size())
		for _, d := range t.Shape {
			sizes[i] *= d
		}
	}
	groups := safetensors.GroupShards(sizes, maxShardBytes)
	weightMap := make(map[string]string, len(tensors))
	var total int64
	for gi, g := range groups {
		name := safetensors.ShardName(base, gi+1, len(groups))
		shard := make([]safetensors.WriteTensor, len(g))
		for j, i := range g {
			shard[j] = tensors[i]
			weightMap[tensors[i].Name] = name
			total += sizes[i]
		}
		if err := writeSparse(filepath.Join(dir, name), shard); err != nil {
			return "", err
		}
	}
	index := filepath.Join(dir, base+safetensors.IndexSuffix)
	return index, safetensors.WriteIndex(index, weightMap, total)
}

func writeSparse(path string, tensors []safetensors.WriteTensor) error {
	prefix, dataLen, err := safetensors.EncodeHeader(tensors, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(prefix); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(prefix)) + dataLen); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

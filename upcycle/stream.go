package upcycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/convert"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// StreamOptions configure StreamGraft.
type StreamOptions struct {
	// Rows and Cols are the latent grid the scaffold is built for.
	Rows, Cols int
	// Seed initialises the scaffold.
	Seed uint64
	// Info is what the checkpoint records besides the model (recipe,
	// base, trained ρ); its DType is ignored: the backbone keeps the
	// base's float type (F32, BF16 or F16), and the scaffold is stored in
	// it too.
	Info checkpoint.Info
	// Progress, when set, is called as backbone bytes are written, with
	// the bytes done and the total.
	Progress func(done, total int64)
}

// StreamReport says what StreamGraft wrote.
type StreamReport struct {
	// Shards are the files written, the scaffold's last.
	Shards []string
	// BackboneBytes and ScaffoldBytes are the tensor bytes of each part.
	BackboneBytes, ScaffoldBytes int64
	// DType is the float type every tensor is stored in.
	DType dtype.DType
}

// scaffoldShard is the shard holding the scaffold and the metadata,
// written last so that the metadata can carry every tensor's checksum.
const scaffoldShard = "scaffold.safetensors"

// StreamGraft writes the DC checkpoint that GraftTeacher builds around
// the checkpoint at base (a file, a sharded folder or an index, in any
// naming loaders reads) of a family that streams its grafts
// (family.Streamable: Z-Image), before any training, without the model
// ever being in memory: every backbone tensor is read from the input as
// it is written, renamed to the backbone's names under dc.BackbonePrefix
// (the fused qkv of a diffusers Z-Image assembled from its three parts),
// in output shards no larger than the input's largest; the scaffold,
// initialised from the scaffold options s and the base's patch embedding,
// goes last, in scaffold.safetensors with the checkpoint's metadata
// (config, and the CRC-32C of every tensor, computed as the bytes pass).
// out is a folder, written under a temporary name and renamed into place
// at the end; nothing is left at out on an error, and an existing out is
// refused. checkpoint.Load reads the result.
func StreamGraft(base string, s Scaffold, out string, opts StreamOptions) (*StreamReport, error) {
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("upcycle: %s already exists; remove it or choose another output", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	ck, err := loaders.Open(base)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	defer ck.Close()
	in := ck.ArchInput(0)
	rep := arch.Detect(in)
	b, f, ok := family.BaseOf(rep)
	st, streams := f.(family.Streamable)
	if !ok || !streams || b.Config == nil {
		return nil, fmt.Errorf("upcycle: %s is a %s checkpoint, which no registered family (%s) streams a graft of", base, rep.Architecture, family.KindList())
	}
	g, err := st.StreamGraft(b.Config, opts.Rows, opts.Cols)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %s: %w", base, err)
	}
	dt, err := floatType(ck)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %s: %w", base, err)
	}
	plan, err := convert.NewPlan(in, convert.Options{Layout: g.Layout, DType: dt})
	if err != nil {
		return nil, fmt.Errorf("upcycle: %s: %w", base, err)
	}

	// The scaffold as GraftTeacher builds it; of the backbone, only the
	// patch embedding is read whole.
	cfg, ts, err := scaffoldOnPatchEmbedding(plan, ck, g, s, opts)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %s: %w", base, err)
	}
	// The metadata reads the backbone's description alone: a backbone
	// without parameters (building one would copy the scaffold, 0.6 GB at
	// Z-Image's width).
	meta, err := checkpoint.MetaOf(&dc.Model{Config: cfg, Backbone: described{spec: g.Spec}}, opts.Info)
	if err != nil {
		return nil, err
	}

	out = filepath.Clean(out)
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()

	var limit int64
	for _, f := range ck.Files {
		limit = max(limit, f.Bytes)
	}
	r := &StreamReport{DType: dt}
	sizes := make([]int64, len(plan.Outputs))
	for i := range plan.Outputs {
		sizes[i] = plan.Outputs[i].Bytes()
		r.BackboneBytes += sizes[i]
	}
	groups := safetensors.GroupShards(sizes, limit)
	sums := map[string]string{}
	weightMap := map[string]string{}
	var done int64
	for gi, g := range groups {
		name := safetensors.ShardName("backbone", gi+1, len(groups))
		tensors := make([]safetensors.WriteTensor, len(g))
		for j, i := range g {
			o := &plan.Outputs[i]
			stored := dc.BackbonePrefix + o.Name
			src, err := plan.Open(o, ck)
			if err != nil {
				return nil, fmt.Errorf("upcycle: %s: %w", base, err)
			}
			tensors[j] = safetensors.WriteTensor{Name: stored, DType: o.DType, Shape: o.Shape,
				Src: &sumReader{r: src, h: crc32.New(castagnoli), left: o.Bytes(), done: func(n int64) {
					done += n
					if opts.Progress != nil {
						opts.Progress(done, r.BackboneBytes)
					}
				}, finish: func(h uint32) { sums[stored] = fmt.Sprintf("%08x", h) }}}
			weightMap[stored] = name
		}
		if err := safetensors.Write(filepath.Join(tmp, name), tensors, map[string]string{"format": "pt"}); err != nil {
			return nil, err
		}
		r.Shards = append(r.Shards, name)
	}

	// The scaffold shard, with the metadata of the whole checkpoint.
	var tensors []safetensors.WriteTensor
	for name, shape := range dc.ScaffoldShapes(cfg) {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("upcycle: the scaffold's initialisation lacks %s %v", name, shape)
		}
		// Encoded as the encoder reads it: no second copy of the scaffold.
		h := crc32.New(castagnoli)
		enc, err := dtype.NewFloat32Reader(t.Data, dt)
		if err != nil {
			return nil, fmt.Errorf("upcycle: scaffold tensor %s: %w", name, err)
		}
		n, _ := io.Copy(h, enc) // reads memory: cannot fail
		sums[name] = fmt.Sprintf("%08x", h.Sum32())
		shape64 := make([]int64, len(shape))
		for i, d := range shape {
			shape64[i] = int64(d)
		}
		src, _ := dtype.NewFloat32Reader(t.Data, dt)
		tensors = append(tensors, safetensors.WriteTensor{Name: name, DType: dt, Shape: shape64, Src: src})
		weightMap[name] = scaffoldShard
		r.ScaffoldBytes += n
	}
	cfgJSON, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	sumJSON, err := json.Marshal(sums)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	md := map[string]string{"format": "pt", checkpoint.ConfigKey: string(cfgJSON), checkpoint.ChecksumKey: string(sumJSON)}
	if err := safetensors.Write(filepath.Join(tmp, scaffoldShard), tensors, md); err != nil {
		return nil, err
	}
	r.Shards = append(r.Shards, scaffoldShard)
	if err := safetensors.WriteIndex(filepath.Join(tmp, "model"+safetensors.IndexSuffix), weightMap, r.BackboneBytes+r.ScaffoldBytes); err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	tmp = ""
	if d, err := os.Open(filepath.Dir(out)); err == nil {
		d.Sync()
		d.Close()
	}
	return r, nil
}

// castagnoli is the CRC-32C table of the checkpoint checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// floatType is the one float type of the checkpoint's tensors, if it is
// one a DC checkpoint stores; otherwise F32 (the plan casts).
func floatType(ck *loaders.Checkpoint) (dtype.DType, error) {
	if len(ck.Tensors) == 0 {
		return dtype.Invalid, fmt.Errorf("no tensors")
	}
	dt := ck.Tensors[0].DType
	for _, t := range ck.Tensors {
		if t.DType != dt {
			return dtype.F32, nil
		}
	}
	switch dt {
	case dtype.F32, dtype.BF16, dtype.F16:
		return dt, nil
	}
	return dtype.F32, nil
}

// scaffoldOnPatchEmbedding returns the config and initial tensors of the
// scaffold GraftTeacher would build, reading of the backbone only its
// patch embedding (the plan's outputs of that name).
func scaffoldOnPatchEmbedding(plan *convert.Plan, ck *loaders.Checkpoint, g family.StreamedGraft, s Scaffold, opts StreamOptions) (*dc.Config, map[string]dc.Tensor, error) {
	var pe *PatchEmbedding
	if s.startsFromPatchEmbedding() {
		vals := map[string][]float32{}
		for i := range plan.Outputs {
			o := &plan.Outputs[i]
			if o.Name != g.PatchWeight && o.Name != g.PatchBias {
				continue
			}
			r, err := plan.Open(o, ck)
			if err != nil {
				return nil, nil, err
			}
			raw, err := io.ReadAll(r)
			if err != nil {
				return nil, nil, fmt.Errorf("tensor %s: %w", o.Name, err)
			}
			v := make([]float32, len(raw)/o.DType.Size())
			if err := dtype.DecodeFloat32(v, raw, o.DType); err != nil {
				return nil, nil, fmt.Errorf("tensor %s: %w", o.Name, err)
			}
			vals[o.Name] = v
		}
		e := g.Embed(vals[g.PatchWeight], vals[g.PatchBias])
		pe = &e
	}
	return graftScaffold(g.InChannels, g.OutChannels, g.Spec.Width(), g.Spec.CondWidth(), pe, s, opts.Rows, opts.Cols, opts.Seed)
}

// described is a backbone known by its description alone, for
// checkpoint.MetaOf, which reads nothing else of it.
type described struct {
	family.Backbone // nil: no other method may be called
	spec            family.Spec
}

// Spec returns the description.
func (d described) Spec() family.Spec { return d.spec }

// sumReader passes a tensor's left bytes through, hashing them, and
// reports the hash once they have all passed (the encoder reads exactly
// a tensor's size, so it may never see io.EOF).
type sumReader struct {
	r      io.Reader
	h      hash.Hash32
	left   int64
	done   func(n int64)
	finish func(sum uint32)
}

func (s *sumReader) Read(b []byte) (int, error) {
	if int64(len(b)) > s.left {
		b = b[:s.left]
	}
	if len(b) == 0 {
		return 0, io.EOF
	}
	n, err := s.r.Read(b)
	s.h.Write(b[:n])
	s.left -= int64(n)
	s.done(int64(n))
	if s.left == 0 {
		s.finish(s.h.Sum32())
	}
	return n, err
}

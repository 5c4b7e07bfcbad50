package convert

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/benchio"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// bf16Noise streams small random BF16 values (|v| in [2^-7, 2), never Inf
// or NaN) without holding them in memory.
type bf16Noise struct{ rng *rand.Rand }

func (r bf16Noise) Read(b []byte) (int, error) {
	for i := 0; i+1 < len(b); i += 2 {
		u := r.rng.Uint32()
		b[i] = byte(u)
		b[i+1] = byte(0x3c+(u>>8)&3) | byte(u>>16)&0x80
	}
	return len(b) &^ 1, nil
}

// f32Noise streams small random F32 values (|v| in [2^-7, 2), never Inf
// or NaN): a BF16 value widened, the low mantissa bits random.
type f32Noise struct{ rng *rand.Rand }

func (r f32Noise) Read(b []byte) (int, error) {
	for i := 0; i+3 < len(b); i += 4 {
		u := r.rng.Uint32()
		b[i], b[i+1], b[i+2] = byte(u), byte(u>>8), byte(u>>16)
		b[i+3] = byte(0x3c+(u>>24)&3) | byte(u>>26)&0x80
	}
	return len(b) &^ 3, nil
}

// writeBenchDiT writes a generated DiT-XL/2 (675 M parameters) in the
// original naming as F32: a 2.7 GB file, written by streaming.
func writeBenchDiT(b *testing.B, path string) *arch.DiTConfig {
	c := &arch.DiTConfig{Depth: 28, HiddenSize: 1152, NumHeads: 16, PatchSize: 2, InChannels: 4, InputSize: 32,
		LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256}
	exp := arch.ExpectedDiT(c, arch.Original)
	src := f32Noise{rand.New(rand.NewPCG(1, 2))}
	ts := make([]safetensors.WriteTensor, len(exp))
	for i, n := range exp.Names() {
		ts[i] = safetensors.WriteTensor{Name: n, DType: dtype.F32, Shape: exp.Shape(i), Src: src}
	}
	if err := safetensors.Write(path, ts, nil); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkConvert converts a generated 2.7 GB DiT from the original to
// the diffusers naming (split qkv, replicated embedders) as one file, and
// copies the same file with io.Copy (both fsynced), reporting both rates,
// their ratio and the process's peak RSS (generation, conversions and
// copies; Linux). The input stays in the page cache; the disk's write
// speed bounds both, so the ratio moves with its writeback from run to
// run.
func BenchmarkConvert(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	c := writeBenchDiT(b, src)
	st, err := os.Stat(src)
	if err != nil {
		b.Fatal(err)
	}
	var convertTime, copyTime time.Duration
	var outBytes int64
	out := filepath.Join(dir, "out.safetensors")
	// Each run starts from a clean disk state (benchio.Timed); the order
	// alternates too.
	timed := func(f func() error) time.Duration { return benchio.Timed(b, out, f) }
	conv := func() {
		convertTime += timed(func() error {
			return convertPath(src, out, c.NumHeads, Options{Layout: arch.Diffusers}, WriteOptions{})
		})
		if ost, err := os.Stat(out); err == nil {
			outBytes += ost.Size()
		}
	}
	cp := func() { copyTime += timed(func() error { return plainCopy(src, out) }) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			conv()
			cp()
		} else {
			cp()
			conv()
		}
	}
	b.StopTimer()
	convertRate := float64(outBytes) / 1e6 / convertTime.Seconds()
	copyRate := float64(st.Size()) * float64(b.N) / 1e6 / copyTime.Seconds()
	b.ReportMetric(convertRate, "convert-MB/s")
	b.ReportMetric(copyRate, "copy-MB/s")
	b.ReportMetric(convertRate/copyRate, "ratio")
	if mb, ok := benchio.PeakMB(); ok {
		b.ReportMetric(mb, "peak-RSS-MB")
	}
}

func plainCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package upcycle

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/benchio"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// BenchmarkStreamGraftZImageTurbo grafts the scaffold (the paper's
// options, the encoder from the patch embedding, a 128×128 latent grid:
// 1024² images) onto a generated full-size Z-Image-Turbo — 3 F32 shards,
// 24.6 GB, headers real and data holes, so reading is free and the disk's
// writes set the pace — and copies the same shards with io.Copy (both
// fsynced), reporting both rates, their ratio and the process's peak RSS
// (Linux). It writes 24.6 GB twice (one at a time), so it runs only with
// DCDIT_BENCH_LARGE=1 set.
func BenchmarkStreamGraftZImageTurbo(b *testing.B) {
	if os.Getenv("DCDIT_BENCH_LARGE") == "" {
		b.Skip("writes 2 × 24.6 GB: set DCDIT_BENCH_LARGE=1 to run it")
	}
	zc := testckpt.ZImageTurbo()
	dir := b.TempDir()
	base := filepath.Join(dir, "transformer")
	if err := os.Mkdir(base, 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := testckpt.WriteSparseSharded(base, "diffusion_pytorch_model", arch.ExpectedZImage(zc, arch.Diffusers), dtype.F32, 10_000_000_000); err != nil {
		b.Fatal(err)
	}
	writeConfig(b, filepath.Join(base, "config.json"), arch.ZImageDiffusersConfig(zc))
	shards, err := filepath.Glob(filepath.Join(base, "*.safetensors"))
	if err != nil || len(shards) != 3 {
		b.Fatalf("generated shards %v (%v), want 3", shards, err)
	}
	s := DefaultScaffold()
	s.EncoderInit = "patch"
	out := filepath.Join(dir, "dc")
	var graftTime, copyTime time.Duration
	var graftBytes, copyBytes int64
	timed := func(f func() error) time.Duration { return benchio.Timed(b, out, f) }
	graft := func() {
		var rep *StreamReport
		graftTime += timed(func() (err error) {
			rep, err = StreamGraft(base, s, out, StreamOptions{Rows: 128, Cols: 128})
			return err
		})
		graftBytes += rep.BackboneBytes + rep.ScaffoldBytes
	}
	cp := func() {
		copyTime += timed(func() error {
			if err := os.Mkdir(out, 0o755); err != nil {
				return err
			}
			for _, sh := range shards {
				n, err := copyFile(sh, filepath.Join(out, filepath.Base(sh)))
				if err != nil {
					return err
				}
				copyBytes += n
			}
			return nil
		})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			graft()
			cp()
		} else {
			cp()
			graft()
		}
	}
	b.StopTimer()
	os.RemoveAll(out)
	graftRate := float64(graftBytes) / 1e6 / graftTime.Seconds()
	copyRate := float64(copyBytes) / 1e6 / copyTime.Seconds()
	b.ReportMetric(graftRate, "graft-MB/s")
	b.ReportMetric(copyRate, "copy-MB/s")
	b.ReportMetric(graftRate/copyRate, "ratio")
	b.ReportMetric(float64(graftBytes)/float64(b.N)/1e9, "GB/graft")
	if mb, ok := benchio.PeakMB(); ok {
		b.ReportMetric(mb, "peak-RSS-MB")
	}
}

func writeConfig(b *testing.B, path string, cfg map[string]any) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(cfg); err != nil {
		b.Fatal(err)
	}
}

// copyFile copies src to dst through memory and syncs it, returning the
// bytes copied: the input's holes are written as the zeros they read as,
// as the graft writes them (a kernel copy would keep them holes).
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(struct{ io.Writer }{out}, struct{ io.Reader }{in})
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

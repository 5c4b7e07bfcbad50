package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// linearShapes are the Linear layers of a Qwen3-4B block, in → out (the
// weight is [out, in], so the product is x·Wᵀ with transB set).
var linearShapes = []struct {
	name    string
	in, out int
}{
	{"q_proj", 2560, 4096},
	{"kv_proj", 2560, 1024},
	{"o_proj", 4096, 2560},
	{"gate_up_proj", 2560, 9728},
	{"down_proj", 9728, 2560},
}

// BenchmarkGemmBF16Linear compares GemmBF16 with Gemm[float32] on the same
// weights, for 1, 128 and 512 tokens. Each iteration runs both, timed
// separately, so that on a shared machine the ratio compares the two under
// the same load; it reports both speeds, bf16/fp32 (the speed ratio) and
// the bytes of B each holds.
func BenchmarkGemmBF16Linear(b *testing.B) {
	for _, m := range []int{1, 128, 512} {
		for _, s := range linearShapes {
			b.Run(fmt.Sprintf("m%d/%s_%dx%d", m, s.name, s.in, s.out), func(b *testing.B) {
				k, n := s.in, s.out
				rng := rand.New(rand.NewPCG(1, 1))
				x := randSlice[float32](rng, m*k)
				w := randSlice[float32](rng, n*k)
				wh := make([]uint16, len(w))
				for i, v := range w {
					wh[i] = dtype.Float32ToBF16(v)
					w[i] = dtype.BF16ToFloat32(wh[i])
				}
				y := make([]float32, m*n)
				Gemm(false, true, m, n, k, 1, x, k, w, k, 0, y, n)
				GemmBF16(true, m, n, k, 1, x, k, wh, k, 0, y, n)
				var t32, t16 time.Duration
				for b.Loop() {
					t0 := time.Now()
					Gemm(false, true, m, n, k, 1, x, k, w, k, 0, y, n)
					t1 := time.Now()
					GemmBF16(true, m, n, k, 1, x, k, wh, k, 0, y, n)
					t16 += time.Since(t1)
					t32 += t1.Sub(t0)
				}
				flops := 2 * float64(m) * float64(k) * float64(n) * float64(b.N)
				b.ReportMetric(flops/t32.Seconds()/1e9, "fp32-GFLOP/s")
				b.ReportMetric(flops/t16.Seconds()/1e9, "bf16-GFLOP/s")
				b.ReportMetric(t32.Seconds()/t16.Seconds(), "bf16/fp32")
				b.ReportMetric(float64(4*len(w))/(1<<20), "fp32-B-MiB")
				b.ReportMetric(float64(2*len(wh))/(1<<20), "bf16-B-MiB")
			})
		}
	}
}

package gemm

import "os"

// Blocking of the portable kernel. It is an order of magnitude slower than
// the vector kernels, so cache pressure matters less; these keep the A
// sliver (2×256) in L1 and the B block (256×512, 512 KiB in float32, 1 MiB
// in float64) in L2.
const goKC, goMC, goNC = 256, 512, 512

// sgemmImpls lists every float32 implementation this build has, best
// first, with whether the CPU can run it. Tests run each available one
// explicitly, whatever the environment selects.
var sgemmImpls []sgemmImpl

type sgemmImpl struct {
	ks        *kernelSet[float32]
	available bool
}

// registerSgemm adds an implementation; platform files call it from init
// before selectSgemm runs.
func registerSgemm(ks *kernelSet[float32], available bool) {
	sgemmImpls = append(sgemmImpls, sgemmImpl{ks, available})
}

var (
	sgemmGo = newKernelSet("generic", goMR, goNR, goKC, goMC, goNC, kernelGo2x4[float32])
	// dgemmKernels serves every float64 product.
	dgemmKernels = newKernelSet("generic", goMR, goNR, goKC, goMC, goNC, kernelGo2x4[float64])
	// sgemmKernels serves every float32 product.
	sgemmKernels *kernelSet[float32]
)

// kernelsEnv names the variable that forces an implementation.
const kernelsEnv = "DCDIT_KERNELS"

func init() {
	registerPlatform()
	registerSgemm(sgemmGo, true)
	sgemmKernels = selectSgemm(os.Getenv(kernelsEnv))
}

// selectSgemm returns the implementation named by force when it is
// available, else the best available one.
func selectSgemm(force string) *kernelSet[float32] {
	for _, im := range sgemmImpls {
		if im.available && im.ks.name == force {
			return im.ks
		}
	}
	for _, im := range sgemmImpls {
		if im.available {
			return im.ks
		}
	}
	return sgemmGo
}

// newKernelSet rounds the block sizes to whole tiles so that the balanced
// blocks of the driver always fit the buffers sized from them.
func newKernelSet[E float32 | float64](name string, mr, nr, kc, mc, nc int, kernel func(int, []E, []E, []E, int, E, E)) *kernelSet[E] {
	return &kernelSet[E]{name: name, mr: mr, nr: nr, kc: kc, mc: roundUp(mc, mr), nc: roundUp(nc, nr), kernel: kernel}
}

package kernels

import "os"

// kernelsEnv names the environment variable that selects kernel
// implementations (read once, at start-up). Its value "generic" keeps every
// assembly loop of this package off, as it does for package gemm and for
// optim's loops, so that the portable Go loops are what runs, and what the
// tests cover, under DCDIT_KERNELS=generic.
const kernelsEnv = "DCDIT_KERNELS"

// genericOnly is true under DCDIT_KERNELS=generic.
var genericOnly = os.Getenv(kernelsEnv) == "generic"

// useAsm reports whether an assembly loop that needs a CPU feature may run:
// the CPU has the feature and the environment does not ask for the Go
// loops.
func useAsm(cpuHas bool) bool { return cpuHas && !genericOnly }

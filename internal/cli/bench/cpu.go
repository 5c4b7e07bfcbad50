package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/dcdit/dcdit/optim"
)

// CPUInfo describes the machine and the kernels the run used.
type CPUInfo struct {
	Model    string   `json:"model"`
	Arch     string   `json:"arch"`
	Features []string `json:"features"`
	// Kernels names the code path of each kernel family that can tell
	// ("optim": "avx512" ...).
	Kernels map[string]string `json:"kernels"`
	// KernelsEnv is DCDIT_KERNELS when set: it may force slower paths.
	KernelsEnv string `json:"kernels_env,omitempty"`
}

func cpuInfo() CPUInfo {
	info := CPUInfo{
		Model:    cpuModel(),
		Arch:     runtime.GOARCH,
		Features: []string{},
		Kernels:  map[string]string{"optim": optim.Kernels()},
	}
	info.KernelsEnv = os.Getenv(optim.KernelsEnv)
	for _, f := range []struct {
		name string
		has  bool
	}{
		{"avx", cpu.X86.HasAVX}, {"avx2", cpu.X86.HasAVX2}, {"fma", cpu.X86.HasFMA},
		{"avx512f", cpu.X86.HasAVX512F}, {"avx512bw", cpu.X86.HasAVX512BW},
		{"avx512dq", cpu.X86.HasAVX512DQ}, {"avx512vl", cpu.X86.HasAVX512VL},
		{"avx512bf16", cpu.X86.HasAVX512BF16}, {"avx512vnni", cpu.X86.HasAVX512VNNI},
		{"asimd", cpu.ARM64.HasASIMD}, {"sve", cpu.ARM64.HasSVE},
	} {
		if f.has {
			info.Features = append(info.Features, f.name)
		}
	}
	return info
}

// cpuModel reads the model name Linux reports; elsewhere it is the
// architecture alone.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(val)
		}
	}
	return runtime.GOARCH
}

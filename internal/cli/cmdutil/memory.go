package cmdutil

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// ReleaseMemory collects garbage and returns the freed memory to the
// system at once: after a phase whose large buffers are dropped (the text
// encoder, before the transformer loads), so the two never count together.
// It collects twice: a sync.Pool inside a dropped model is reachable from
// the runtime's list of pools until the second collection.
func ReleaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// LimitHeap sets the Go collector's soft memory limit to the heap that is
// live now plus headroom bytes, unless GOMEMLIMIT is set: with gigabytes of
// live weights the default pacing lets garbage grow to as much again
// before collecting it. Call it once the model is loaded.
func LimitHeap(headroom int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	debug.SetMemoryLimit(int64(s[0].Value.Uint64()-s[1].Value.Uint64()) + headroom)
}

// Resident returns the process's resident memory now and its peak so far
// in bytes (VmRSS and VmHWM of /proc/self/status); ok is false where the
// system does not report them.
func Resident() (now, peak int64, ok bool) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	var got int
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			now, got = v<<10, got+1
		case "VmHWM:":
			peak, got = v<<10, got+1
		}
	}
	return now, peak, got == 2
}

// Phase reports a finished phase of a long command on w: its time, and
// the resident memory now and at peak so far where the system says.
// Phases shorter than a second, and a nil w, print nothing.
func Phase(w io.Writer, what string, took time.Duration) {
	if w == nil || took < time.Second {
		return
	}
	line := what + fmt.Sprintf(" in %.1fs", took.Seconds())
	if now, peak, ok := Resident(); ok {
		line += fmt.Sprintf(" (resident %.2f GB, peak %.2f GB)", float64(now)/1e9, float64(peak)/1e9)
	}
	fmt.Fprintln(w, line)
}

// LiftHeapLimit removes the limit LimitHeap set (unless GOMEMLIMIT is
// set): the phase after sampling (a VAE decode) allocates more than its
// headroom, and a limit below the live heap makes the collector run
// without pause.
func LiftHeapLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(math.MaxInt64)
}

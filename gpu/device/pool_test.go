package device

import (
	"testing"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// OpenGPU opens the GPU with the options, or skips the test; the device
// and the runtime close when it ends. (Exported for the package's external
// tests.)
func OpenGPU(t testing.TB, opts Options) *Device {
	t.Helper()
	rt, err := cuda.Open(cuda.Options{})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	if _, _, _, err := rt.NVRTC(); err != nil {
		rt.Close()
		t.Skipf("no NVRTC: %v", err)
	}
	d, err := Open(rt, opts)
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); rt.Close() })
	return d
}

// TestPoolBound: the pool reuses a freed buffer of the asked size and never
// keeps more than PoolBytes, however many sizes come back (a DC model's
// kept counts make new ones every step).
func TestPoolBound(t *testing.T) {
	const capBytes = 1 << 20
	d := OpenGPU(t, Options{PoolBytes: capBytes})
	b, err := d.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	d.Recycle(b)
	again, err := d.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if again.Ptr() != b.Ptr() {
		t.Errorf("Alloc after Recycle of the same size: a new buffer, want the pooled one")
	}
	d.Recycle(again)
	for n := 1; n <= 300; n++ {
		b, err := d.Alloc(1000 + 7*n)
		if err != nil {
			t.Fatal(err)
		}
		d.Recycle(b)
		if d.pooled > capBytes {
			t.Fatalf("after %d sizes the pool keeps %d bytes, want at most %d", n, d.pooled, capBytes)
		}
	}
}

// TestPackingsBound: the device keeps at most maxPackings packings, and
// the one asked for last survives an eviction.
func TestPackingsBound(t *testing.T) {
	d := OpenGPU(t, Options{})
	for n := 1; n <= maxPackings+100; n++ {
		p, err := d.Packing([]int{0, n, 2 * n})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.packs) > maxPackings {
			t.Fatalf("%d packings kept, want at most %d", len(d.packs), maxPackings)
		}
		if _, err := d.Packing([]int{0, 1, 2}); err != nil { // the hot one, used every time
			t.Fatal(err)
		}
		if n == maxPackings+100 {
			if got, err := d.Packing([]int{0, n, 2 * n}); err != nil || got != p {
				t.Errorf("the packing asked for last was replaced (err %v)", err)
			}
		}
	}
	if _, ok := d.packs["0,1,2,"]; !ok {
		t.Errorf("the packing used at every step was evicted")
	}
}

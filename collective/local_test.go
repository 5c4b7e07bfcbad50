package collective

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// runRanks runs f on every rank of a local group of n, each in its own
// goroutine, and returns each rank's error; it fails the test rather than
// hang when the ranks do not all return.
func runRanks(t *testing.T, n int, f func(c Comm) error) []error {
	t.Helper()
	comms, err := NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	done := make(chan int, n)
	for r, c := range comms {
		go func() {
			errs[r] = f(c)
			done <- r
		}()
	}
	timeout := time.After(10 * time.Second)
	for range comms {
		select {
		case <-done:
		case <-timeout:
			comms[0].Close()
			t.Fatalf("%d ranks: an operation hung", n)
		}
	}
	return errs
}

// input is rank r's buffer of length n: element i is 10r + i, so every
// sum is exact and easy to state.
func input(r, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(10*r + i)
	}
	return x
}

// sumOf is element i of the sum of input(r, ·) over ranks 0..size-1.
func sumOf(size, i int) float32 { return float32(10*size*(size-1)/2 + size*i) }

func TestShard(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    [][2]int
	}{
		{7, 1, [][2]int{{0, 7}}},
		{7, 3, [][2]int{{0, 3}, {3, 5}, {5, 7}}},
		{8, 4, [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}}},
		{2, 3, [][2]int{{0, 1}, {1, 2}, {2, 2}}},
		{0, 2, [][2]int{{0, 0}, {0, 0}}},
	} {
		for r, w := range tc.want {
			if lo, hi := Shard(tc.n, tc.size, r); lo != w[0] || hi != w[1] {
				t.Errorf("Shard(%d, %d, %d) = [%d,%d), want [%d,%d)", tc.n, tc.size, r, lo, hi, w[0], w[1])
			}
		}
	}
}

func TestOps(t *testing.T) {
	const n = 7 // divisible by none of the sizes but 1
	for _, size := range []int{1, 2, 3, 4} {
		for _, tc := range []struct {
			name string
			// do runs the operation on rank c and returns its result.
			do   func(c Comm) ([]float32, error)
			want func(rank, i int) float32
		}{
			{"AllReduceSum", func(c Comm) ([]float32, error) {
				buf := input(c.Rank(), n)
				return buf, c.AllReduceSum(buf)
			}, func(_, i int) float32 { return sumOf(size, i) }},
			{"ReduceScatterSum", func(c Comm) ([]float32, error) {
				lo, hi := Shard(n, c.Size(), c.Rank())
				dst := make([]float32, hi-lo)
				return dst, c.ReduceScatterSum(dst, input(c.Rank(), n))
			}, func(rank, i int) float32 {
				lo, _ := Shard(n, size, rank)
				return sumOf(size, lo+i)
			}},
			{"ReduceScatterSum in place", func(c Comm) ([]float32, error) {
				lo, hi := Shard(n, c.Size(), c.Rank())
				src := input(c.Rank(), n)
				return src[lo:hi], c.ReduceScatterSum(src[lo:hi], src)
			}, func(rank, i int) float32 {
				lo, _ := Shard(n, size, rank)
				return sumOf(size, lo+i)
			}},
			{"AllGather in place", func(c Comm) ([]float32, error) {
				// Each rank holds only its own shard of 100r + i.
				lo, hi := Shard(n, c.Size(), c.Rank())
				dst := make([]float32, n)
				for i := lo; i < hi; i++ {
					dst[i] = float32(100*c.Rank() + i)
				}
				return dst, c.AllGather(dst, dst[lo:hi])
			}, func(_, i int) float32 {
				for r := range size {
					if lo, hi := Shard(n, size, r); i >= lo && i < hi {
						return float32(100*r + i)
					}
				}
				return -1
			}},
			{"Broadcast", func(c Comm) ([]float32, error) {
				buf := input(c.Rank(), n)
				return buf, c.Broadcast(buf, size-1)
			}, func(_, i int) float32 { return float32(10*(size-1) + i) }},
		} {
			got := make([][]float32, size)
			errs := runRanks(t, size, func(c Comm) error {
				var err error
				got[c.Rank()], err = tc.do(c)
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("%s, %d ranks: rank %d: %v", tc.name, size, r, err)
					continue
				}
				want := make([]float32, len(got[r]))
				for i := range want {
					want[i] = tc.want(r, i)
				}
				if !slices.Equal(got[r], want) {
					t.Errorf("%s, %d ranks: rank %d got %v, want %v", tc.name, size, r, got[r], want)
				}
			}
		}
	}
}

func TestMismatchErrorsEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(c Comm) error
		want string
	}{
		{"lengths", func(c Comm) error {
			return c.AllReduceSum(make([]float32, 5+c.Rank()))
		}, "rank 0 has 5 elements, rank 1 has 6"},
		{"operations", func(c Comm) error {
			if c.Rank() == 2 {
				return c.Broadcast(make([]float32, 5), 0)
			}
			return c.AllReduceSum(make([]float32, 5))
		}, "rank 0 called AllReduceSum, rank 2 called Broadcast"},
		{"shard", func(c Comm) error {
			return c.ReduceScatterSum(make([]float32, 3), make([]float32, 7))
		}, "rank 1: dst has 3 elements, want 2"},
		{"root", func(c Comm) error {
			return c.Broadcast(make([]float32, 5), 3)
		}, "root 3, want a rank in [0,3)"},
	} {
		errs := runRanks(t, 3, tc.do)
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: rank %d: error %v, want one saying %q", tc.name, r, err, tc.want)
			}
		}
	}
}

func TestCloseReleasesWaiters(t *testing.T) {
	errs := runRanks(t, 3, func(c Comm) error {
		if c.Rank() == 1 {
			// Rank 1 gives up instead of taking part.
			time.Sleep(10 * time.Millisecond)
			return c.Close()
		}
		return c.AllReduceSum(make([]float32, 4))
	})
	for _, r := range []int{0, 2} {
		if !errors.Is(errs[r], ErrClosed) {
			t.Errorf("rank %d: error %v, want ErrClosed", r, errs[r])
		}
	}
	if errs[1] != nil {
		t.Errorf("Close: %v", errs[1])
	}
}

func TestNewLocalRejectsEmptyGroup(t *testing.T) {
	if _, err := NewLocal(0); err == nil {
		t.Error("NewLocal(0) succeeded")
	}
}

package optim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dcdit/dcdit/collective"
)

// onRanks runs f for every rank of a local group of n, each in its own
// goroutine, and fails the test with the ranks' errors. A failing rank
// closes the group so that the others do not wait for it.
func onRanks(t *testing.T, n int, f func(rank int, c collective.Comm) error) {
	t.Helper()
	comms, err := collective.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[k] = f(k, c); errs[k] != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("%d ranks: rank %d: %v", n, k, err)
		}
	}
}

// TestShardedAdamWMatchesMeanGradient checks that n ranks, each with its
// own gradients, stepping a ShardedAdamW, end every step with the bits of
// one AdamW stepping on the mean gradient (summed in rank order, as the
// reduce-scatter sums, then divided by n), and hold its moments between
// them.
func TestShardedAdamWMatchesMeanGradient(t *testing.T) {
	const (
		length = 1001 // divisible by neither 2 nor 3
		steps  = 4
	)
	mask, err := FreezeMask(length, Range{100, 180}, Range{600, 611})
	if err != nil {
		t.Fatal(err)
	}
	base := DefaultHyper()
	base.LR = 3e-3
	// The groups straddle the shard boundaries of 2 and 3 ranks (501, 334,
	// 668) and a frozen range.
	groups := []Group{{Name: "no decay", Ranges: []Range{{300, 520}, {560, 700}}, Hyper: Hyper{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6}}}
	for _, ranks := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d ranks", ranks), func(t *testing.T) {
			eachKernels(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(ranks), 7))
				init := randn(r, length, 1)
				grads := make([][][]float32, steps) // step, rank
				for s := range grads {
					for range ranks {
						grads[s] = append(grads[s], randn(r, length, 0.1))
					}
				}

				ref, err := NewAdamW(mask, base, groups...)
				if err != nil {
					t.Fatal(err)
				}
				want := append([]float32(nil), init...)
				mean := make([]float32, length)
				for s := range steps {
					copy(mean, grads[s][0])
					for _, g := range grads[s][1:] {
						for i, x := range g {
							mean[i] += x
						}
					}
					for i := range mean {
						mean[i] /= float32(ranks)
					}
					ref.Step(want, mean)
				}

				got := make([][]float32, ranks)
				opts := make([]*ShardedAdamW, ranks)
				onRanks(t, ranks, func(k int, c collective.Comm) error {
					var err error
					if opts[k], err = NewShardedAdamW(c, mask, base, groups...); err != nil {
						return err
					}
					got[k] = append([]float32(nil), init...)
					for s := range steps {
						if err := opts[k].Step(got[k], grads[s][k]); err != nil {
							return err
						}
					}
					return nil
				})
				var moments State
				for k := range ranks {
					if i := sameBits(got[k], want); i >= 0 {
						t.Errorf("%d ranks: rank %d: param %d = %v, want %v", ranks, k, i, got[k][i], want[i])
					}
					st := opts[k].Local().State()
					if st.Step != steps {
						t.Errorf("%d ranks: rank %d took %d steps, want %d", ranks, k, st.Step, steps)
					}
					moments.M = append(moments.M, st.M...)
					moments.V = append(moments.V, st.V...)
				}
				if len(moments.M) != mask.NumTrainable() {
					t.Fatalf("%d ranks hold %d moments, want %d", ranks, len(moments.M), mask.NumTrainable())
				}
				if i, j := sameBits(moments.M, ref.State().M), sameBits(moments.V, ref.State().V); i >= 0 || j >= 0 {
					t.Errorf("%d ranks: moments differ from one AdamW's (m at %d, v at %d)", ranks, i, j)
				}
			})
		})
	}
}

func TestShardedAdamWStepErrors(t *testing.T) {
	comms, err := collective.NewLocal(1)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewShardedAdamW(comms[0], AllTrainable(10), DefaultHyper())
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Step(make([]float32, 10), make([]float32, 9)); err == nil {
		t.Error("Step with 9 grads for 10 params succeeded")
	}
	comms[0].Close()
	if err := o.Step(make([]float32, 10), make([]float32, 10)); err == nil {
		t.Error("Step on a closed group succeeded")
	}
}

// TestShardedEMAMatchesEMA checks that the shards' averages, gathered, are
// one EMA's bits, frozen elements and a change of decay included.
func TestShardedEMAMatchesEMA(t *testing.T) {
	const (
		length = 1001
		steps  = 3
	)
	mask, err := FreezeMask(length, Range{320, 350})
	if err != nil {
		t.Fatal(err)
	}
	for _, ranks := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d ranks", ranks), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ranks), 9))
			init := randn(r, length, 1)
			params := make([][]float32, steps)
			for s := range params {
				params[s] = randn(r, length, 1)
			}
			ref, err := NewEMA(mask, init, 0)
			if err != nil {
				t.Fatal(err)
			}
			for s := range steps {
				ref.Update(params[s])
				ref.Decay = 0.9
			}
			got := make([][]float32, ranks)
			onRanks(t, ranks, func(k int, c collective.Comm) error {
				e, err := NewShardedEMA(c, mask, init, 0)
				if err != nil {
					return err
				}
				for s := range steps {
					if err := e.Update(params[s]); err != nil {
						return err
					}
					e.Local().Decay = 0.9
				}
				got[k] = make([]float32, length)
				return e.Gather(got[k])
			})
			for k := range ranks {
				if i := sameBits(got[k], ref.Weights()); i >= 0 {
					t.Errorf("rank %d: average %d = %v, want %v", k, i, got[k][i], ref.Weights()[i])
				}
			}
		})
	}
}

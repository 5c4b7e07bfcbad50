package collective

import "errors"

// ErrClosed is returned by an operation on a group that one of its ranks
// has closed, including an operation that was waiting for the others.
var ErrClosed = errors.New("collective: group closed")

// Comm is one rank's handle on a group of Size ranks. Every rank must call
// the same operations in the same order with buffers of agreeing lengths;
// an operation returns only once every rank has taken its part, or with an
// error on every rank when they disagree. A Comm is used by one goroutine.
type Comm interface {
	// Rank is this rank's index in [0, Size).
	Rank() int
	// Size is the number of ranks in the group.
	Size() int
	// AllReduceSum replaces buf on every rank by the element-wise sum of
	// every rank's buf.
	AllReduceSum(buf []float32) error
	// ReduceScatterSum sums every rank's src element-wise and leaves in
	// dst this rank's shard of the sum: elements Shard(len(src), Size,
	// Rank) of it. dst may be that shard of src itself.
	ReduceScatterSum(dst, src []float32) error
	// AllGather is the inverse of the split: every rank's src, its shard
	// (Shard(len(dst), Size, Rank)), is copied into that shard of dst on
	// every rank. src may be that shard of dst itself.
	AllGather(dst, src []float32) error
	// Broadcast copies root's buf into buf on every rank.
	Broadcast(buf []float32, root int) error
	// Close ends the group for every rank: operations waiting or to come
	// return ErrClosed.
	Close() error
}

// Shard returns the elements [lo, hi) of a buffer of n elements that rank
// holds in a group of size ranks: contiguous shards in rank order, the
// first n mod size of them one element longer than the rest. Every user
// of a reduce-scatter's or all-gather's result splits with it.
func Shard(n, size, rank int) (lo, hi int) {
	q, r := n/size, n%size
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

package collective

import (
	"fmt"
	"sync"
)

// NewLocal returns the n ranks of a group that lives in this process: each
// Comm is meant for its own goroutine, and an operation returns once all n
// have called it. Sums run over ranks in rank order, so results are
// bit-identical on every rank and in every run.
func NewLocal(n int) ([]Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("collective: NewLocal: %d ranks, want at least 1", n)
	}
	g := &group{size: n, posts: make([]post, n)}
	g.cond.L = &g.mu
	comms := make([]Comm, n)
	for r := range comms {
		comms[r] = &local{g: g, rank: r}
	}
	return comms, nil
}

// group is the state the ranks of a local group share: a barrier whose
// every round also exchanges what each rank posted to it.
type group struct {
	mu      sync.Mutex
	cond    sync.Cond
	size    int
	arrived int
	gen     uint64
	closed  bool
	posts   []post // the round being gathered
	round   []post // the posts of the round completed last
}

// post is one rank's side of an operation.
type post struct {
	op     string
	shared []float32 // what the other ranks read
	root   int
	n      int   // the length every rank must agree on
	err    error // this rank's own objection to its arguments
}

// wait posts p for rank and blocks until every rank has posted, returning
// every rank's post in rank order.
func (g *group) wait(rank int, p post) ([]post, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	g.posts[rank] = p
	g.arrived++
	if g.arrived == g.size {
		// A fresh slice per round: a rank still reading the last round's
		// posts must not see the next round's.
		g.round, g.posts = g.posts, make([]post, g.size)
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
		return g.round, nil
	}
	// No later round can complete before this rank posts to it, so when
	// gen moves on g.round is this rank's round.
	for gen := g.gen; g.gen == gen; g.cond.Wait() {
		if g.closed {
			return nil, ErrClosed
		}
	}
	return g.round, nil
}

// local is one rank of a group made by NewLocal.
type local struct {
	g       *group
	rank    int
	scratch []float32
}

func (c *local) Rank() int { return c.rank }
func (c *local) Size() int { return c.g.size }

func (c *local) Close() error {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.g.closed = true
	c.g.cond.Broadcast()
	return nil
}

// exchange runs the first barrier of an operation and checks that every
// rank called the same operation with agreeing arguments. Every rank sees
// the same posts, so every rank reaches the same verdict.
func (c *local) exchange(p post) ([]post, error) {
	round, err := c.g.wait(c.rank, p)
	if err != nil {
		return nil, fmt.Errorf("collective: %s on rank %d: %w", p.op, c.rank, err)
	}
	first := round[0]
	for k, q := range round {
		switch {
		case q.err != nil:
			return nil, fmt.Errorf("collective: %s: rank %d: %w", p.op, k, q.err)
		case q.op != first.op:
			return nil, fmt.Errorf("collective: rank 0 called %s, rank %d called %s", first.op, k, q.op)
		case q.n != first.n:
			return nil, fmt.Errorf("collective: %s: rank 0 has %d elements, rank %d has %d", p.op, first.n, k, q.n)
		case q.root != first.root:
			return nil, fmt.Errorf("collective: %s: rank 0 names root %d, rank %d names root %d", p.op, first.root, k, q.root)
		}
	}
	return round, nil
}

// done is the second barrier: no rank returns, and so writes its own
// buffers, while another may still be reading them.
func (c *local) done(op string) error {
	if _, err := c.g.wait(c.rank, post{}); err != nil {
		return fmt.Errorf("collective: %s on rank %d: %w", op, c.rank, err)
	}
	return nil
}

// sumInto adds every rank's shared[lo:hi], rank 0 first, and copies the
// sum into dst once the others are done reading this rank's buffers.
func (c *local) sumInto(dst []float32, round []post, lo, hi int, op string) error {
	if cap(c.scratch) < hi-lo {
		c.scratch = make([]float32, hi-lo)
	}
	s := c.scratch[:hi-lo]
	copy(s, round[0].shared[lo:hi])
	for _, q := range round[1:] {
		for i, x := range q.shared[lo:hi] {
			s[i] += x
		}
	}
	if err := c.done(op); err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

// sharded posts an operation over a whole buffer of which part must be
// this rank's shard; shared is what the other ranks read.
func (c *local) sharded(op string, whole, part, shared []float32, partName string) (round []post, lo, hi int, err error) {
	lo, hi = Shard(len(whole), c.g.size, c.rank)
	p := post{op: op, shared: shared, n: len(whole)}
	if len(part) != hi-lo {
		p.err = fmt.Errorf("%s has %d elements, want %d (shard [%d,%d) of %d)", partName, len(part), hi-lo, lo, hi, len(whole))
	}
	round, err = c.exchange(p)
	return round, lo, hi, err
}

func (c *local) AllReduceSum(buf []float32) error {
	const op = "AllReduceSum"
	round, err := c.exchange(post{op: op, shared: buf, n: len(buf)})
	if err != nil {
		return err
	}
	return c.sumInto(buf, round, 0, len(buf), op)
}

func (c *local) ReduceScatterSum(dst, src []float32) error {
	const op = "ReduceScatterSum"
	round, lo, hi, err := c.sharded(op, src, dst, src, "dst")
	if err != nil {
		return err
	}
	return c.sumInto(dst, round, lo, hi, op)
}

func (c *local) AllGather(dst, src []float32) error {
	const op = "AllGather"
	round, lo, hi, err := c.sharded(op, dst, src, src, "src")
	if err != nil {
		return err
	}
	for k, q := range round {
		if k != c.rank {
			lo, hi := Shard(len(dst), c.g.size, k)
			copy(dst[lo:hi], q.shared)
		}
	}
	// src may be this shard of dst, which the others read until done.
	if err := c.done(op); err != nil {
		return err
	}
	copy(dst[lo:hi], src)
	return nil
}

func (c *local) Broadcast(buf []float32, root int) error {
	const op = "Broadcast"
	p := post{op: op, shared: buf, n: len(buf), root: root}
	if root < 0 || root >= c.g.size {
		p.err = fmt.Errorf("root %d, want a rank in [0,%d)", root, c.g.size)
	}
	round, err := c.exchange(p)
	if err != nil {
		return err
	}
	if c.rank != root {
		copy(buf, round[root].shared)
	}
	return c.done(op)
}

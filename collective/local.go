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
	op   string
	a, b []float32 // buf or dst; src
	root int
	n    int   // the length every rank must agree on
	err  error // this rank's own objection to its arguments
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

// sum adds every rank's src[lo:hi] into scratch, rank 0 first.
func (c *local) sum(round []post, lo, hi int) []float32 {
	if cap(c.scratch) < hi-lo {
		c.scratch = make([]float32, hi-lo)
	}
	s := c.scratch[:hi-lo]
	copy(s, round[0].b[lo:hi])
	for _, q := range round[1:] {
		for i, x := range q.b[lo:hi] {
			s[i] += x
		}
	}
	return s
}

func (c *local) AllReduceSum(buf []float32) error {
	const op = "AllReduceSum"
	round, err := c.exchange(post{op: op, b: buf, n: len(buf)})
	if err != nil {
		return err
	}
	s := c.sum(round, 0, len(buf))
	if err := c.done(op); err != nil {
		return err
	}
	copy(buf, s)
	return nil
}

func (c *local) ReduceScatterSum(dst, src []float32) error {
	const op = "ReduceScatterSum"
	lo, hi := Shard(len(src), c.g.size, c.rank)
	p := post{op: op, a: dst, b: src, n: len(src)}
	if len(dst) != hi-lo {
		p.err = fmt.Errorf("dst has %d elements, want %d (shard [%d,%d) of %d)", len(dst), hi-lo, lo, hi, len(src))
	}
	round, err := c.exchange(p)
	if err != nil {
		return err
	}
	s := c.sum(round, lo, hi)
	if err := c.done(op); err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (c *local) AllGather(dst, src []float32) error {
	const op = "AllGather"
	lo, hi := Shard(len(dst), c.g.size, c.rank)
	p := post{op: op, a: dst, b: src, n: len(dst)}
	if len(src) != hi-lo {
		p.err = fmt.Errorf("src has %d elements, want %d (shard [%d,%d) of %d)", len(src), hi-lo, lo, hi, len(dst))
	}
	round, err := c.exchange(p)
	if err != nil {
		return err
	}
	for k, q := range round {
		if k != c.rank {
			lo, hi := Shard(len(dst), c.g.size, k)
			copy(dst[lo:hi], q.b)
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
	p := post{op: op, a: buf, n: len(buf), root: root}
	if root < 0 || root >= c.g.size {
		p.err = fmt.Errorf("root %d, want a rank in [0,%d)", root, c.g.size)
	}
	round, err := c.exchange(p)
	if err != nil {
		return err
	}
	if c.rank != root {
		copy(buf, round[root].a)
	}
	return c.done(op)
}

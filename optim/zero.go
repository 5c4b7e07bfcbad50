package optim

import (
	"fmt"

	"github.com/dcdit/dcdit/collective"
)

// ShardedAdamW is AdamW split over the ranks of a data-parallel group as
// ZeRO stage 1 splits it: every rank holds the whole parameter buffer, but
// the moments only of its own shard of it (collective.Shard of the buffer's
// elements). A step averages the ranks' gradients with a reduce-scatter,
// updates the rank's shard with AdamW's arithmetic, and all-gathers the
// updated shards, so every rank ends the step with the same parameters as
// one AdamW stepping on the mean gradient.
//
// A shard boundary may fall inside a group's range or a trainable range:
// the shard's optimiser takes the part of each that lies in the shard.
type ShardedAdamW struct {
	comm   collective.Comm
	shard  Range
	local  *AdamW
	mean   []float32 // this rank's shard of the mean gradient
	scale  float32   // the number of ranks, which divides the summed gradient
	length int
}

// NewShardedAdamW returns rank comm.Rank()'s part of an AdamW with the
// arguments of NewAdamW. Every rank must make its part with the same
// arguments.
func NewShardedAdamW(comm collective.Comm, mask *Mask, base Hyper, groups ...Group) (*ShardedAdamW, error) {
	hyper, segs, err := cutSegments(mask, base, groups)
	if err != nil {
		return nil, err
	}
	lo, hi := collective.Shard(mask.n, comm.Size(), comm.Rank())
	var local []segment
	for _, s := range segs {
		if a, b := max(s.lo, lo), min(s.lo+s.n, hi); a < b {
			local = append(local, segment{lo: a - lo, n: b - a, group: s.group})
		}
	}
	m, err := shardMask(mask, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("optim: ShardedAdamW rank %d: %w", comm.Rank(), err)
	}
	return &ShardedAdamW{
		comm:   comm,
		shard:  Range{lo, hi},
		local:  newAdamW(m, hyper, local),
		mean:   make([]float32, hi-lo),
		scale:  float32(comm.Size()),
		length: mask.n,
	}, nil
}

// Shard is the part of the parameter buffer whose moments this rank holds.
func (o *ShardedAdamW) Shard() Range { return o.shard }

// Local is the AdamW that steps this rank's shard: its buffers are the
// shard's elements, its State the shard's moments (the trainable elements
// of the shard in index order, so the ranks' states laid end to end in
// rank order are the unsharded optimiser's). Set learning rates on it.
func (o *ShardedAdamW) Local() *AdamW { return o.local }

// Step takes one step on every rank: grads is this rank's gradient of the
// whole buffer, params the whole buffer, the same on every rank before and
// after. grads is read only.
func (o *ShardedAdamW) Step(params, grads []float32) error {
	if len(params) != o.length || len(grads) != o.length {
		return fmt.Errorf("optim: ShardedAdamW.Step on rank %d: %d params and %d grads, want %d", o.comm.Rank(), len(params), len(grads), o.length)
	}
	if err := o.comm.ReduceScatterSum(o.mean, grads); err != nil {
		return fmt.Errorf("optim: ShardedAdamW.Step: gradients: %w", err)
	}
	if o.scale != 1 {
		for i := range o.mean {
			o.mean[i] /= o.scale
		}
	}
	o.local.Step(params[o.shard.Lo:o.shard.Hi], o.mean)
	if err := o.comm.AllGather(params, params[o.shard.Lo:o.shard.Hi]); err != nil {
		return fmt.Errorf("optim: ShardedAdamW.Step: parameters: %w", err)
	}
	return nil
}

// shardMask is the mask of elements [lo, hi) of mask's buffer, as a
// buffer of its own.
func shardMask(mask *Mask, lo, hi int) (*Mask, error) {
	var trainable []Range
	for _, t := range mask.trainable {
		if a, b := max(t.Lo, lo), min(t.Hi, hi); a < b {
			trainable = append(trainable, Range{a - lo, b - lo})
		}
	}
	return TrainMask(hi-lo, trainable...)
}

// ShardedEMA is EMA split over the ranks of a data-parallel group as
// ShardedAdamW splits AdamW: every rank averages only its own shard of the
// parameters (collective.Shard of the buffer's elements), and the whole
// average exists only when Gather assembles it.
type ShardedEMA struct {
	comm   collective.Comm
	shard  Range
	local  *EMA
	length int
}

// NewShardedEMA returns rank comm.Rank()'s part of an EMA with the
// arguments of NewEMA; params is the whole buffer.
func NewShardedEMA(comm collective.Comm, mask *Mask, params []float32, decay float64) (*ShardedEMA, error) {
	if mask == nil || len(params) != mask.n {
		return nil, fmt.Errorf("optim: NewShardedEMA: %d params for a nil mask or one of another length", len(params))
	}
	lo, hi := collective.Shard(mask.n, comm.Size(), comm.Rank())
	m, err := shardMask(mask, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("optim: ShardedEMA rank %d: %w", comm.Rank(), err)
	}
	local, err := NewEMA(m, params[lo:hi], decay)
	if err != nil {
		return nil, fmt.Errorf("optim: ShardedEMA rank %d: %w", comm.Rank(), err)
	}
	return &ShardedEMA{comm: comm, shard: Range{lo, hi}, local: local, length: mask.n}, nil
}

// Shard is the part of the parameter buffer this rank averages.
func (e *ShardedEMA) Shard() Range { return e.shard }

// Local is the EMA of this rank's shard: set its Decay on every rank
// alike; its Weights, the shard's average, are what a per-shard
// checkpoint saves and restores.
func (e *ShardedEMA) Local() *EMA { return e.local }

// Update folds this rank's shard of params, the whole buffer, into the
// average. It needs no other rank.
func (e *ShardedEMA) Update(params []float32) error {
	if len(params) != e.length {
		return fmt.Errorf("optim: ShardedEMA.Update on rank %d: %d params, want %d", e.comm.Rank(), len(params), e.length)
	}
	e.local.Update(params[e.shard.Lo:e.shard.Hi])
	return nil
}

// Gather assembles the whole average into dst on every rank; every rank
// must call it.
func (e *ShardedEMA) Gather(dst []float32) error {
	if err := e.comm.AllGather(dst, e.local.Weights()); err != nil {
		return fmt.Errorf("optim: ShardedEMA.Gather: %w", err)
	}
	return nil
}

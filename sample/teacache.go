package sample

import (
	"fmt"
	"math"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/family"
)

// TeaCache is TeaCache's step cache (Liu et al., "Timestep Embedding
// Tells") over one sampling run of a model whose forward splits around
// its blocks (family.StagedTeacher, family.StagedBackbone). At every step
// it takes the first block's modulated input m, adds the rescaled
// relative L1 change Poly(Σ|m − m_prev| / Σ|m_prev|) since the previous
// step (a negative value counting as 0) to an accumulator, and while the sum stays under Threshold skips
// every block, adding instead the residual (blocks' output − input) of
// the last step it computed; reaching the threshold computes the step
// and empties the accumulator. The first and the last step always
// compute. Each guidance branch (the conditional and the unconditional
// half of a guided batch) keeps its own accumulator, previous input and
// residual, but they decide together: a step computes every branch when
// any branch's sum reaches the threshold. Guidance extrapolates from the
// branches' difference, so one branch's stale residual beside the other's
// fresh output comes out amplified by the guidance scale; decided apart,
// the branches fall out of step near the end of a run, and samples
// collapse.
//
// A DC model's cache (DC.Cache) holds the backbone's residual over the
// branch's packed kept tokens; a skipped step keeps the cells of the
// branch's last computed step (dc.Planner), so that the residual lies
// over the same tokens, and its change is measured on the tokens the
// backbone reads at those cells. A computed step takes the router's new
// cells, and the first step that runs dense after routed ones (DC.DenseBelow)
// always computes.
//
// A TeaCache serves one run: make a new one for the next.
type TeaCache struct {
	// Threshold is the accumulated change under which steps are skipped;
	// 0 computes every step.
	Threshold float64
	// Poly rescales the relative change (the model's fit).
	Poly Poly
	// Steps is the run's number of model calls (the sampler's steps).
	Steps int

	step     int
	branches []*cacheBranch
	// Skips records, per model call, which branches were skipped.
	Skips [][]bool

	// A DC model's run: its conditioning, and the plan's branch count,
	// decision and probe.
	dc      *dc.Model
	staged  family.StagedBackbone
	cv      cond.Value
	nb      int
	compute bool
	probe   *family.Stages[mat.Tensor]
	adjust  float64

	// calib, when set, collects the run's changes (a calibrating cache).
	calib *Calibration
}

// Calibration collects, over sampling runs that compute every step, the
// pairs TeaCache's rescaling is fitted to (FitPoly): per guidance branch
// and step, the relative L1 change of the first block's modulated input
// (X) and of the model's output (Y) since the previous step. A DC
// model's input change is measured as its cache measures it, on the
// cells of the previous step.
type Calibration struct {
	X, Y []float64
}

// NewCalibrating returns a cache that computes every step and adds the
// run's changes to calib.
func NewCalibrating(calib *Calibration) *TeaCache {
	return &TeaCache{Poly: Poly{1, 0}, Steps: math.MaxInt, calib: calib}
}

// observe adds the changes of a forward's output out (nb branches) to
// the calibration.
func (tc *TeaCache) observe(out []float32, nb int) {
	if tc.calib == nil {
		return
	}
	per := len(out) / nb
	for b := range nb {
		br, o := tc.branch(b), out[b*per:(b+1)*per]
		if br.out != nil && br.hasX {
			tc.calib.X = append(tc.calib.X, br.x)
			tc.calib.Y = append(tc.calib.Y, RelL1(o, br.out))
		}
		br.out, br.hasX = slices.Clone(o), false
	}
}

// cacheBranch is one guidance branch's cache.
type cacheBranch struct {
	acc      float64
	prev     []float32
	residual []float32
	// kept are a DC branch's cells at its last computed step.
	kept []bool
	// A calibrating cache's input change this step (hasX) and output at
	// the previous one.
	x    float64
	hasX bool
	out  []float32
}

// Skipped is the number of branch steps skipped, and Total the number
// of branch steps run.
func (tc *TeaCache) Skipped() (skipped, total int) {
	for _, s := range tc.Skips {
		for _, v := range s {
			if v {
				skipped++
			}
			total++
		}
	}
	return skipped, total
}

// NewTeaCache checks the settings of a cache for a run of steps model
// calls.
func NewTeaCache(threshold float64, poly Poly, steps int) (*TeaCache, error) {
	if !(threshold >= 0) || math.IsInf(threshold, 0) {
		return nil, fmt.Errorf("teacache: threshold %v, want a finite value ≥ 0", threshold)
	}
	if err := poly.check(); err != nil {
		return nil, err
	}
	return &TeaCache{Threshold: threshold, Poly: poly, Steps: steps}, nil
}

// branch returns branch b's cache, made on first use.
func (tc *TeaCache) branch(b int) *cacheBranch {
	for len(tc.branches) <= b {
		tc.branches = append(tc.branches, &cacheBranch{})
	}
	return tc.branches[b]
}

// decide says whether branch b computes this step, whose first block's
// modulated input is mod, and accumulates its change.
func (tc *TeaCache) decide(b int, mod []float32) bool {
	br := tc.branch(b)
	if br.prev == nil || len(br.prev) != len(mod) {
		br.acc = 0
		return true
	}
	rel := RelL1(mod, br.prev)
	br.x, br.hasX = rel, true
	if tc.step == 0 || tc.step >= tc.Steps-1 || br.residual == nil {
		br.acc = 0
		return true
	}
	// A fitted polynomial may dip below zero near the edge of its data;
	// a negative step would run the accumulator backwards.
	br.acc += max(tc.Poly.Eval(rel), 0)
	if br.acc < tc.Threshold {
		return false
	}
	br.acc = 0
	return true
}

// RelL1 is TeaCache's relative L1 distance Σ|a − b| / Σ|b| (+Inf when b
// is all zeros and a is not).
func RelL1(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num += math.Abs(float64(a[i]) - float64(b[i]))
		den += math.Abs(float64(b[i]))
	}
	if den == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return num / den
}

// applyStages runs the blocks of st over its nb equal branches of
// samples when compute, else adds each branch's cached residual, keeping
// each branch's modulated input and computed residual, and returns the
// blocks' output stream.
func applyStages[O any](tc *TeaCache, st *family.Stages[O], nb int, compute bool) []float32 {
	S, W := len(st.Offsets)-1, st.Width
	per := S / nb
	var out []float32
	if compute {
		out = st.Blocks(st.Hidden, 0, S)
	} else {
		out = make([]float32, len(st.Hidden))
	}
	for b := range nb {
		br := tc.branch(b)
		r0, r1 := st.Offsets[b*per]*W, st.Offsets[(b+1)*per]*W
		in, o := st.Hidden[r0:r1], out[r0:r1]
		if compute {
			br.residual = make([]float32, len(in))
			for i := range in {
				br.residual[i] = o[i] - in[i]
			}
		} else {
			for i := range in {
				o[i] = in[i] + br.residual[i]
			}
		}
		br.prev = slices.Clone(st.Modulated[r0:r1])
	}
	tc.Skips = append(tc.Skips, slices.Repeat([]bool{!compute}, nb))
	tc.step++
	return out
}

// decideAll decides a forward of nb branches from their modulated
// inputs: every branch computes when one's sum reaches the threshold
// (TeaCache's doc says why), emptying every accumulator.
func (tc *TeaCache) decideAll(offsets []int, W int, mod []float32, nb int) bool {
	per := (len(offsets) - 1) / nb
	compute := false
	for b := range nb {
		compute = tc.decide(b, mod[offsets[b*per]*W:offsets[(b+1)*per]*W]) || compute
	}
	if compute {
		for b := range nb {
			tc.branch(b).acc = 0
		}
	}
	return compute
}

// Teacher is Teacher(t, c, rows, cols) under the cache.
func (tc *TeaCache) Teacher(t family.StagedTeacher, c Conditions, rows, cols int) diffusion.Model {
	return func(x, tm []float32, guided bool) ([]float32, error) {
		in, err := c.Input(tm, guided)
		if err != nil {
			return nil, err
		}
		st, err := t.PredictStages(x, in, rows, cols)
		if err != nil {
			return nil, err
		}
		nb := 1
		if guided {
			nb = 2
		}
		compute := tc.decideAll(st.Offsets, st.Width, st.Modulated, nb)
		out, err := st.Finish(applyStages(tc, st, nb, compute))
		if err == nil {
			tc.observe(out, nb)
		}
		return out, err
	}
}

// TeacherFLOPs is what the run cost a teacher whose one forward of one
// sample costs forward, split as f, over samples samples per branch:
// skipped branch steps without the blocks, every step with the cache's
// modulation.
func (tc *TeaCache) TeacherFLOPs(forward float64, f family.StepFLOPs, samples int) float64 {
	var total float64
	for _, s := range tc.Skips {
		for _, skipped := range s {
			cost := forward + f.Modulation
			if skipped {
				cost -= f.Blocks
			}
			total += cost * float64(samples)
		}
	}
	return total
}

// Staged returns the step-cache seam of a teacher, or an error naming
// the kind that has none.
func Staged(t family.Teacher, kind string) (family.StagedTeacher, error) {
	s, ok := t.(family.StagedTeacher)
	if !ok {
		return nil, fmt.Errorf("teacache: a %s model does not split its forward around its blocks (family.StagedTeacher), so its steps cannot be cached", kind)
	}
	return s, nil
}

// forDC prepares the cache for a DC model's run: the model with its
// backbone wrapped, whose forward the cache splits.
func (tc *TeaCache) forDC(m *dc.Model) (*dc.Model, error) {
	if tc.dc != nil {
		return tc.dc, nil
	}
	staged, ok := m.Backbone.(family.StagedBackbone)
	if !ok {
		return nil, fmt.Errorf("teacache: a DC model's %s backbone does not split its forward around its blocks (family.StagedBackbone), so its steps cannot be cached", family.KindOf(m.Backbone))
	}
	c := *m
	c.Backbone = &cachedBackbone{Backbone: m.Backbone, tc: tc}
	tc.dc, tc.staged = &c, staged
	return tc.dc, nil
}

// cachedBackbone is a DC model's backbone under the cache.
type cachedBackbone struct {
	family.Backbone
	tc *TeaCache
}

// Condition keeps the conditioning, which the plan's probe reads.
func (b *cachedBackbone) Condition(in cond.Input) (cond.Value, error) {
	cv, err := b.Backbone.Condition(in)
	b.tc.cv = cv
	return cv, err
}

// Forward runs the backbone's stages, its blocks only when the plan
// computes.
func (b *cachedBackbone) Forward(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	tc := b.tc
	st := tc.probe
	if st == nil {
		var err error
		if st, err = tc.staged.ForwardStages(x, cv, offsets, pos); err != nil {
			return nil, err
		}
	}
	return st.Finish(applyStages(tc, st, tc.nb, tc.compute))
}

// turnsDense reports whether a sample keeps all of its L cells in kept and
// did not in last: the first dense step after routed ones (sampling dense
// below a timestep). That step computes, as the first and the last do: a
// skip would run it on the routed step's cells, below the noise level
// where the model drops any, and with a residual cached over another set
// of tokens than the step's own.
func turnsDense(kept, last []bool, L int) bool {
	for s := 0; s+L <= len(kept); s += L {
		if !slices.Contains(kept[s:s+L], false) && slices.Contains(last[s:s+L], false) {
			return true
		}
	}
	return false
}

// plan is the dc.Planner of a forward of nb branches: it measures each
// branch's change on the cells of its last computed step and keeps them
// when the step is skipped.
func (tc *TeaCache) plan(nb int) dc.Planner {
	return func(tokens dc.Tokens, kept []bool, batch int) ([]bool, error) {
		tc.probe, tc.adjust, tc.nb, tc.compute = nil, 0, nb, true
		last := make([]bool, 0, len(kept))
		for b := range nb {
			br := tc.branch(b)
			if len(br.kept) != len(kept)/nb {
				return kept, nil
			}
			last = append(last, br.kept...)
		}
		if tc.step == 0 || tc.step >= tc.Steps-1 || turnsDense(kept, last, tc.dc.Config.Cells()) {
			for b := range nb {
				tc.branch(b).acc = 0
			}
			return kept, nil
		}
		ch, err := tc.dc.Config.Pack(last, batch)
		if err != nil {
			return nil, err
		}
		st, err := tc.staged.ForwardStages(tokens(ch.Index), tc.cv, ch.Offsets, ch.Pos)
		if err != nil {
			return nil, err
		}
		tc.compute = tc.decideAll(st.Offsets, st.Width, st.Modulated, nb)
		if !tc.compute || slices.Equal(kept, last) {
			// Skipped, or the router keeps the cells the probe ran over
			// (every cell at a dense step): the blocks, if they run, run
			// on the probe's stages.
			tc.probe = st
			return last, nil
		}
		// A computed step takes the router's new cells: the stages run
		// again over them.
		f := tc.staged.StepFLOPs(ch.NumKept)
		tc.adjust += f.Before + f.Modulation
		return kept, nil
	}
}

// afterDC records a DC forward's computed cells and returns what its
// FLOPs differ by from dc.Model.ForwardFLOPs of the cells it kept.
func (tc *TeaCache) afterDC(res *dc.Result, nb int) float64 {
	kept := res.Chunks.Kept
	per := len(kept) / nb
	n := len(res.Chunks.NumKept) / nb
	skips := tc.Skips[len(tc.Skips)-1]
	adjust := tc.adjust + tc.staged.StepFLOPs(res.Chunks.NumKept).Modulation
	for b := range nb {
		if skips[b] {
			adjust -= tc.staged.StepFLOPs(res.Chunks.NumKept[b*n : (b+1)*n]).Blocks
		} else {
			tc.branch(b).kept = slices.Clone(kept[b*per : (b+1)*per])
		}
	}
	tc.probe, tc.adjust = nil, 0
	return adjust
}

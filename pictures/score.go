package pictures

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/fid"
	"github.com/dcdit/dcdit/inception"
)

// ISSplit is the number of pictures per split of the Inception Score, as
// the ADM evaluator computes it (split_size 5000).
const ISSplit = 5000

// Scorer streams picture sets through the FID Inception network.
type Scorer struct {
	Net *inception.Net
	// Batch is the pictures per network call (default 32).
	Batch int
	// IS also computes the Inception Score (it keeps each picture's 1008
	// class probabilities, 4 KB a picture).
	IS bool
	// Progress, when set, is called after each batch with the pictures
	// scored and the total.
	Progress func(done, total int)
}

// Scores are what Scorer.Score measures of a set.
type Scores struct {
	Stats fid.Stats
	// IS is the Inception Score (ADM's: softmax of the head without its
	// bias, splits of ISSplit pictures, the mean over splits); 0 unless
	// Scorer.IS.
	IS float64
}

// Score computes the FID statistics of set (and its Inception Score).
func (s *Scorer) Score(set Set) (*Scores, error) {
	acc, err := fid.NewAccumulator(inception.FeatureDim)
	if err != nil {
		return nil, err
	}
	batch := s.Batch
	if batch < 1 {
		batch = 32
	}
	var probs []float32
	done, total := 0, set.Len()
	err = set.Each(batch, func(pix []uint8, n, h, w int) error {
		r, err := s.Net.RunUint8(pix, n, h, w, inception.Outputs{Logits: s.IS})
		if err != nil {
			return fmt.Errorf("pictures: %s: %w", set, err)
		}
		for i, v := range r.Features {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("pictures: %s: picture %d gave non-finite Inception features (broken weights?)", set, done+i/inception.FeatureDim)
			}
		}
		if err := acc.Add(r.Features); err != nil {
			return err
		}
		if s.IS {
			probs = appendSoftmax(probs, r.LogitsNoBias, n)
		}
		done += n
		if s.Progress != nil {
			s.Progress(done, total)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st, err := acc.Stats()
	if err != nil {
		return nil, fmt.Errorf("pictures: %s: %w", set, err)
	}
	out := &Scores{Stats: st}
	if s.IS {
		out.IS = inceptionScore(probs, done)
	}
	return out, nil
}

// appendSoftmax appends the softmax of each of n rows of logits.
func appendSoftmax(dst, logits []float32, n int) []float32 {
	k := len(logits) / n
	for i := range n {
		row := logits[i*k : (i+1)*k]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		for _, v := range row {
			dst = append(dst, float32(math.Exp(float64(v)-m)/sum))
		}
	}
	return dst
}

// inceptionScore is ADM's compute_inception_score over n rows of class
// probabilities: per split, exp(mean over pictures of KL(p(y|x) ‖ p(y)));
// the mean over splits.
func inceptionScore(probs []float32, n int) float64 {
	if n == 0 {
		return 0
	}
	k := len(probs) / n
	var scores []float64
	for lo := 0; lo < n; lo += ISSplit {
		hi := min(lo+ISSplit, n)
		marg := make([]float64, k)
		for i := lo; i < hi; i++ {
			for j, p := range probs[i*k : (i+1)*k] {
				marg[j] += float64(p)
			}
		}
		for j := range marg {
			marg[j] /= float64(hi - lo)
		}
		kl := 0.0
		for i := lo; i < hi; i++ {
			for j, p := range probs[i*k : (i+1)*k] {
				if p > 0 {
					kl += float64(p) * (math.Log(float64(p)) - math.Log(marg[j]))
				}
			}
		}
		scores = append(scores, math.Exp(kl/float64(hi-lo)))
	}
	sum := 0.0
	for _, s := range scores {
		sum += s
	}
	return sum / float64(len(scores))
}

// SideStats returns side's statistics: read from its file, or computed
// with s.
func (s *Scorer) SideStats(side *Side) (*Scores, error) {
	if side.Stats != nil {
		return &Scores{Stats: *side.Stats}, nil
	}
	return s.Score(side.Set)
}

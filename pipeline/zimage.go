package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/sample"
)

// captionTable is a caption-conditioned model's caption embedding table
// (the shapes captions' stand-in for a text encoder) with what rebuilds it.
type captionTable struct {
	info  shapes.CaptionTable
	table []float32
}

func newCaptionTable(dim int, seed uint64) *captionTable {
	return &captionTable{info: shapes.NewCaptionTable(dim, seed), table: shapes.EmbeddingTable(dim, seed)}
}

// attachCaptions gives the training data of a caption-conditioned model
// (a Z-Image, or a DC model around one) its captions, which must be in the vocabulary of the model's
// caption table, or its encoded captions (attachPromptFeatures); other
// models train on labels and leave them out.
func (m *model) attachCaptions(d *distill.Dataset, set *datasets.Set) error {
	if m.captionDim > 0 && set.CaptionFeats != nil {
		return m.attachPromptFeatures(d, set)
	}
	if m.captions == nil || set.Captions == nil {
		return nil
	}
	if !slices.Equal(set.Vocabulary, m.captions.info.Vocabulary) {
		return fmt.Errorf("pipeline: the data's captions use a vocabulary of %d words (%s …), the caption table the shapes vocabulary of %d",
			len(set.Vocabulary), strings.Join(set.Vocabulary[:min(4, len(set.Vocabulary))], " "), len(m.captions.info.Vocabulary))
	}
	return d.WithCaptions(set.Captions, len(set.Vocabulary))
}

// flowMatching is the recipe's flow-matching process: Z-Image's training
// table over diffusion.steps timesteps with diffusion.shift.
func flowMatching(r *recipes.Recipe) (*diffusion.FlowMatch, error) {
	table, err := flowmatch.Config{NumTrainTimesteps: r.Diffusion.Steps, Shift: r.Diffusion.Shift}.TrainingTable()
	if err != nil {
		return nil, fmt.Errorf("pipeline: diffusion: %w", err)
	}
	return &diffusion.FlowMatch{Table: table}, nil
}

// captionLen is the caption length a DC-Z-Image's FLOPs count: the shapes
// captions' longest, or for prompts the typical prompt's (0:
// the family's typical caption), the prompts being read only after the graft.
func captionLen(r *recipes.Recipe) int {
	if onPrompts(r) {
		return 0
	}
	return shapes.MaxCaptionWords
}

// onPrompts says whether the recipe trains on the teacher's samples for
// data.prompts, whose captions are encoded prompts rather than words of
// the base's caption table.
func onPrompts(r *recipes.Recipe) bool {
	return r.Data.Prompts != "" && r.Data.Source == recipes.SourceTeacher
}

// captionTeacherData samples d.Samples latents from a caption-conditioned
// base trained with flow matching, a Z-Image (named id), for captions of the shapes data (balanced over the classes, drawn
// from seed): Euler over Tongyi's schedule of d.SamplingSteps steps at the
// recipe's shift, guided as Z-Image guides (pos + cfg·(pos − neg) against
// the empty prompt, on for cfg > 1) — the paper's training data for
// DC-Z-Image's flow-matching stage. It reuses path when it holds samples
// drawn with the same settings by the same teacher.
func captionTeacherData(path string, b *base, id string, r *recipes.Recipe, seed uint64, logf func(string, ...any)) (*datasets.Set, error) {
	if r.Data.Prompts != "" {
		return promptTeacherData(path, b, id, r, seed, logf)
	}
	d := r.Data
	key := fmt.Sprintf("zimage teacher samples=%d steps=%d cfg=%g shift=%g/%d seed=%d teacher=%s",
		d.Samples, d.SamplingSteps, d.CFG, r.Diffusion.Shift, r.Diffusion.Steps, seed, id)
	if s, ok := cachedData(path, key); ok {
		logf("data: reusing %d teacher samples from %s", s.N, path)
		return s, nil
	}
	g, err := shapes.New(b.rows, seed)
	if err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	prompts, err := g.BalancedCaptionedSet(d.Samples)
	if err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	dim := b.teacher.Conditioning().CaptionWidth
	set := &datasets.Set{N: d.Samples, C: b.teacher.InChannels(), H: b.rows, W: b.cols, NumClasses: prompts.NumClasses, Classes: prompts.Classes,
		Labels: prompts.Labels, Captions: prompts.Captions, Vocabulary: prompts.Vocabulary,
		Metadata: map[string]string{"dcdit.generated_by": key}}
	// The empty prompt of every sample of a batch, the guidance's other branch.
	neg, err := shapes.CaptionInputs(make([][]int, teacherBatch), b.captions.table, dim)
	if err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	logf("data: sampling %d latents from the caption-conditioned teacher (%d Euler steps, cfg %g)", d.Samples, d.SamplingSteps, d.CFG)
	set.Latents, err = sampleCaptionTeacher(b, r, seed, logf, func(lo, n int) ([]cond.Caption, []cond.Caption, error) {
		pos, err := shapes.CaptionInputs(prompts.Captions[lo:lo+n], b.captions.table, dim)
		return pos, neg[:n], err
	})
	if err != nil {
		return nil, err
	}
	if err := datasets.Write(path, set); err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	return set, nil
}

// teacherBatch is the samples a caption-conditioned teacher draws at once.
const teacherBatch = 32

// sampleZImageTeacher draws data.samples latents from the Z-Image base
// b: Euler over Tongyi's schedule of data.sampling_steps steps at the
// recipe's shift, guided as Z-Image guides (pos + cfg·(pos − neg), on for
// cfg > 1), in batches of teacherBatch whose captions caps gives (the
// positive ones of samples lo…lo+n−1 and, for guidance, as many
// negative ones).
func sampleCaptionTeacher(b *base, r *recipes.Recipe, seed uint64, logf func(string, ...any),
	caps func(lo, n int) (pos, neg []cond.Caption, err error)) ([]float32, error) {
	d := r.Data
	sched, err := flowmatch.Config{NumTrainTimesteps: r.Diffusion.Steps, Shift: r.Diffusion.Shift}.Schedule(flowmatch.Tongyi, d.SamplingSteps)
	if err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	C := b.teacher.InChannels()
	proc := &diffusion.FlowMatch{Schedule: sched}
	latents := make([]float32, 0, d.Samples*C*b.rows*b.cols)
	for lo := 0; lo < d.Samples; lo += teacherBatch {
		n := min(teacherBatch, d.Samples-lo)
		pos, neg, err := caps(lo, n)
		if err != nil {
			return nil, fmt.Errorf("pipeline: data: %w", err)
		}
		model := sample.Teacher(b.teacher, sample.Conditions{Captions: pos, Negative: neg}, b.rows, b.cols)
		x, err := proc.Sample(model, diffusion.Shape{B: n, C: C, HW: b.rows * b.cols}, diffusion.SampleOptions{
			Guidance: d.CFG,
			Seed:     seed ^ uint64(lo)*0x9e3779b97f4a7c15,
		})
		if err != nil {
			return nil, fmt.Errorf("pipeline: data: %w", err)
		}
		latents = append(latents, x...)
		logf("data: %d/%d teacher samples", lo+n, d.Samples)
	}
	return latents, nil
}

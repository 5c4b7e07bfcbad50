package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
	"github.com/dcdit/dcdit/zimage/flowmatch"
)

// captionTable is a Z-Image's caption embedding table with what rebuilds it.
type captionTable struct {
	info  shapes.CaptionTable
	table []float32
}

func newCaptionTable(dim int, seed uint64) *captionTable {
	return &captionTable{info: shapes.NewCaptionTable(dim, seed), table: shapes.EmbeddingTable(dim, seed)}
}

// attachCaptions gives the training data of a Z-Image or a DC model
// around one its captions, which must be in the vocabulary of the model's
// caption table; other models train on labels and leave them out.
func (m *model) attachCaptions(d *distill.Dataset, set *datasets.Set) error {
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

// saveZImage writes a trained Z-Image folder with its recipe and caption
// table in the metadata.
func (m *model) saveZImage(dir string, r *recipes.Recipe) error {
	info, err := json.Marshal(m.captions.info)
	if err != nil {
		return err
	}
	return zimage.Save(dir, m.zimage, nil, map[string]string{"dcdit.recipe": r.Text, shapes.CaptionTableKey: string(info)})
}

// describeZImage is describe for a Z-Image.
func describeZImage(c *arch.ZImageConfig) string {
	return fmt.Sprintf("Z-Image (%d layers, %d refiner layers each, D %d, %d heads, patch %d, captions of %d-wide features, sequences padded to multiples of %d)",
		c.NLayers, c.NRefinerLayers, c.Dim, c.NHeads, c.PatchSize, c.CapFeatDim, c.SeqMultiple())
}

// graftZImage grafts the recipe's scaffold onto a second copy of the
// Z-Image base (the base itself stays the frozen teacher) on its
// base.latent_size grid, and joins the parameters. Its FLOPs count
// captions of the shapes captions' longest length. Its backbone pads no
// image tokens: the kept count is anything, and the reference's pad
// tokens attend, while a teacher whose images fill the multiple never
// trained them (FD at ρ 0.6 22.8 unpadded against 34.0 padded to 8,
// docs/zimage.md).
func graftZImage(r *recipes.Recipe, b *base, seed uint64) (*model, error) {
	zm, err := zimage.New(b.zweights)
	if err != nil {
		return nil, err
	}
	bb := zimage.NewBackbone(zm)
	bb.CaptionLen, bb.ImageMultiple = shapes.MaxCaptionWords, 1
	g, err := upcycle.GraftZImage(bb, r.Scaffold.Upcycle(), b.size, b.size, seed)
	if err != nil {
		return nil, err
	}
	if g.Config.LatentSkip {
		// Flow matching's data-ward velocity x0 − ε: a cell's moves by
		// −1/σ of its input's move. Z-Image's conditioning vector is the
		// timestep's alone, so the empty prompt stands for every caption.
		proc, err := flowMatching(r)
		if err != nil {
			return nil, err
		}
		in := cond.Input{}
		for _, s := range proc.Table.Sigmas {
			in.T = append(in.T, 1-s)
			in.Captions = append(in.Captions, cond.Caption{Features: make([]float32, zm.Config.CapFeatDim), Len: 1})
		}
		if err := upcycle.LatentSkipPrior(g, []cond.Input{in}, func(t float32) float64 { return -1 / float64(1-t) }); err != nil {
			return nil, err
		}
	}
	ps, err := upcycle.JoinParams(g)
	if err != nil {
		return nil, err
	}
	return &model{dc: g, params: ps, captions: b.captions}, nil
}

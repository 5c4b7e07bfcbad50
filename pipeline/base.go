package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/zimage"
)

// base is the recipe's pretrained model, frozen: the teacher a DC model
// is grafted onto, distilled from and measured against. It is a
// class-conditional DiT (trained with DDPM) or a caption-conditioned
// Z-Image (trained with flow matching): one dcdit trained on the shapes
// captions, its caption table in its metadata, or any Z-Image, a real one
// included, for a recipe whose data.prompts its text encoder encodes.
type base struct {
	dit     *dit.Model
	weights *dit.Weights // what dit was built from: a finetune copies it

	zimage   *zimage.Model
	captions *captionTable // nil: the recipe's captions are encoded prompts
	size     int           // a Z-Image's latent grid side (base.latent_size)
}

// loadBase loads the recipe's base, frozen, or returns nil for a recipe
// trained from scratch. The file's architecture must be the one the
// recipe's diffusion process trains (DDPM: a DiT; flow matching: a
// Z-Image).
func loadBase(r *recipes.Recipe) (*base, error) {
	if r.Base == nil {
		return nil, nil
	}
	path := r.BasePath()
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: base: %w", err)
	}
	rep := arch.Detect(ck.ArchInput(r.Base.NumHeads))
	meta := ck.Metadata
	ck.Close()
	if rep.Architecture == arch.ZImage {
		return loadZImageBase(r, meta)
	}
	if r.IsZImageBase() {
		return nil, fmt.Errorf("pipeline: %s: diffusion.process = %q: found a %s base %s, expected a Z-Image (a DiT is upcycled with %q)",
			r.File, r.Diffusion.Process, rep.Architecture, path, recipes.ProcessDDPM)
	}
	if err := checkBaseSchedule(r); err != nil {
		return nil, err
	}
	if r.Base.LatentSize != 0 {
		return nil, fmt.Errorf("pipeline: %s: base.latent_size = %d: a DiT base's latent grid is its own (the key sizes a Z-Image graft)", r.File, r.Base.LatentSize)
	}
	w, err := dit.Load(path, dit.LoadOptions{NumHeads: r.Base.NumHeads})
	if err != nil {
		return nil, err
	}
	// The head count may come from base.num_heads or the file's metadata:
	// bound it before it reaches attention.
	if err := w.Config.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: base %s: %w", path, err)
	}
	t, err := dit.New(w)
	if err != nil {
		return nil, err
	}
	t.Params.SetRequiresGrad(false)
	return &base{dit: t, weights: w}, nil
}

// loadZImageBase loads a Z-Image base with the caption table its metadata
// records, which the shapes captions need; for data.prompts the table is
// not read, and a base without one (a real Z-Image) will do.
func loadZImageBase(r *recipes.Recipe, meta map[string]string) (*base, error) {
	path := r.BasePath()
	switch {
	case !r.IsZImageBase():
		return nil, fmt.Errorf("pipeline: %s: found a Z-Image base %s with diffusion.process = %q, expected %q (Z-Image is trained with flow matching)",
			r.File, path, r.Diffusion.Process, recipes.ProcessFlowMatching)
	case r.Base.LatentSize < 1:
		return nil, fmt.Errorf("pipeline: %s: base.latent_size is missing: a Z-Image has no fixed resolution, so the recipe says the latent grid side to graft for", r.File)
	case !r.HasScaffold():
		return nil, fmt.Errorf("pipeline: %s: a Z-Image base without [scaffold]: finetuning a Z-Image as it is is not supported", r.File)
	}
	w, err := zimage.Load(path, zimage.LoadOptions{})
	if err != nil {
		return nil, err
	}
	t, err := zimage.New(w)
	if err != nil {
		return nil, err
	}
	t.Params.SetRequiresGrad(false)
	b := &base{zimage: t, size: r.Base.LatentSize}
	if onPrompts(r) {
		return b, nil
	}
	info, table, found, err := shapes.CaptionTableFrom(meta, w.Config.CapFeatDim)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pipeline: base %s: %w", path, err)
	case !found:
		return nil, fmt.Errorf("pipeline: base %s records no caption table (metadata %q): without data.prompts dcdit upcycles only the Z-Images it trained on the shapes captions; set data.prompts to train on the base's samples for prompts its repository's text encoder encodes", path, shapes.CaptionTableKey)
	}
	b.captions = &captionTable{info: info, table: table}
	return b, nil
}

// params is the base's arena.
func (b *base) params() *params.Set {
	if b.zimage != nil {
		return b.zimage.Params
	}
	return b.dit.Params
}

// inputSize is the side of the latent grid the base works on.
func (b *base) inputSize() int {
	if b.zimage != nil {
		return b.size
	}
	return b.dit.Config.InputSize
}

// teacher is the base as distillation's teacher.
func (b *base) teacher() distill.Teacher {
	if b.zimage != nil {
		return zimage.Teacher{Model: b.zimage}
	}
	return dit.Teacher{Model: b.dit}
}

// evalTeacher is the base as the evaluation's teacher of the data set,
// sampled with the recipe's flow-matching shift for a Z-Image, which
// reads the data's encoded prompts when it has them, else the shapes
// captions through the base's table.
func (b *base) evalTeacher(r *recipes.Recipe, set *datasets.Set) eval.Teacher {
	if b.zimage != nil && set.CaptionFeats != nil {
		return eval.TeacherOf(zimage.Teacher{Model: b.zimage, CaptionLen: captionLen(r)}, nil, r.Diffusion.Shift)
	}
	if b.zimage != nil {
		return eval.TeacherOf(zimage.Teacher{Model: b.zimage, CaptionLen: captionLen(r)}, b.captions.table, r.Diffusion.Shift)
	}
	return eval.TeacherOf(dit.Teacher{Model: b.dit}, nil, 0)
}

// identity names the base by its configuration and a SHA-256 of the
// weights it computes with (as loaded, so that another file with the same
// weights counts as the same teacher, and only the tensors in use are
// read: a few seconds at DiT-XL's size); "none" without a base.
func (b *base) identity() string {
	if b == nil {
		return "none"
	}
	h := sha256.New()
	buf := make([]byte, 0, 1<<16)
	data := b.params().Data
	for i, v := range data {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		if len(buf) == cap(buf) || i == len(data)-1 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	if b.zimage != nil {
		return fmt.Sprintf("%s on %d×%d latents, weights sha256 %s", describeZImage(b.zimage.Config), b.size, b.size, sum)
	}
	c := b.dit.Config
	return fmt.Sprintf("DiT depth %d, width %d, %d heads, patch %d, %d×%d×%d latents, %d classes, weights sha256 %s",
		c.Depth, c.HiddenSize, c.NumHeads, c.PatchSize, c.InChannels, c.InputSize, c.InputSize, c.NumClasses, sum)
}

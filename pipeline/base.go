package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/recipes"
)

// base is the recipe's pretrained model, frozen: the teacher a DC model
// is grafted onto, distilled from and measured against, of any family
// that opens it (family.OpenTeacher). The built-in ones are a
// class-conditional DiT (trained with DDPM) and a caption-conditioned
// Z-Image (trained with flow matching): one dcdit trained on the shapes
// captions, its caption table in its metadata, or any Z-Image, a real one
// included, for a recipe whose data.prompts its text encoder encodes.
type base struct {
	teacher family.Teacher
	name    string // what people call the family's models (family.ModelName)
	// rows and cols are the latent grid it works on: its own, or for a
	// teacher that takes any grid, base.latent_size on each side.
	rows, cols int
	captions   *captionTable // nil: labels, or captions that are encoded prompts
}

// loadBase loads the recipe's base, frozen, or returns nil for a recipe
// trained from scratch. The teacher's diffusion process must be the one
// the recipe trains with.
func loadBase(r *recipes.Recipe) (*base, error) {
	if r.Base == nil {
		return nil, nil
	}
	path := r.BasePath()
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: base: %w", err)
	}
	meta := ck.Metadata
	opts := family.OpenOptions{NumHeads: r.Base.NumHeads, CaptionLen: captionLen(r)}
	f, opener, err := family.Opener(family.CandidateOf(path, ck, opts))
	ck.Close()
	if err != nil {
		return nil, fmt.Errorf("pipeline: base: %w", err)
	}
	t, _, err := opener.OpenTeacher(path, opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: base: %w", err)
	}
	if p := t.Process(); p != r.Diffusion.Process {
		return nil, fmt.Errorf("pipeline: %s: diffusion.process = %q: the base %s (%s) was trained with %q",
			r.File, r.Diffusion.Process, path, summary(t), p)
	}
	b := &base{teacher: t, name: family.ModelName(f)}
	switch b.rows, b.cols = t.Grid(); {
	case b.rows == 0 && r.Base.LatentSize < 1:
		return nil, fmt.Errorf("pipeline: %s: base.latent_size is missing: the base takes any latent grid, so the recipe says the side to graft for", r.File)
	case b.rows == 0:
		b.rows, b.cols = r.Base.LatentSize, r.Base.LatentSize
	case r.Base.LatentSize != 0:
		return nil, fmt.Errorf("pipeline: %s: base.latent_size = %d: the base's latent grid is its own, %d×%d (the key sizes the graft of a base that takes any grid)", r.File, r.Base.LatentSize, b.rows, b.cols)
	}
	if _, ok := t.(family.Finetunable); !ok && !r.HasScaffold() {
		return nil, fmt.Errorf("pipeline: %s: a base without [scaffold] is finetuned as it is, which its family does not support (%s)", r.File, summary(t))
	}
	if t.Process() == recipes.ProcessDDPM {
		if err := checkBaseSchedule(r); err != nil {
			return nil, err
		}
	}
	width := t.Conditioning().CaptionWidth
	if width == 0 || onPrompts(r) {
		// The shapes captions need the base's table; encoded prompts
		// do not read it, and a base without one (a real Z-Image) will do.
		return b, nil
	}
	info, table, found, err := shapes.CaptionTableFrom(meta, width)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pipeline: base %s: %w", path, err)
	case !found:
		return nil, fmt.Errorf("pipeline: base %s records no caption table (metadata %q): without data.prompts dcdit upcycles only the caption-conditioned models it trained on the shapes captions; set data.prompts to train on the base's samples for prompts its repository's text encoder encodes", path, shapes.CaptionTableKey)
	}
	b.captions = &captionTable{info: info, table: table}
	return b, nil
}

// summary names a teacher's configuration for people: its
// family.Summarized line, else Describe.
func summary(t family.Teacher) string {
	if s, ok := t.(family.Summarized); ok {
		return s.Summary()
	}
	return t.Describe()
}

// params is the base's arena.
func (b *base) params() *params.Set { return b.teacher.Parameters() }

// evalTeacher is the base as the evaluation's teacher of the data set:
// sampled with the recipe's flow-matching shift under flow matching, and
// for a caption-conditioned base reading the data's encoded prompts when
// it has them, else the shapes captions through the base's table.
func (b *base) evalTeacher(r *recipes.Recipe, set *datasets.Set) eval.Teacher {
	var table []float32
	if b.captions != nil && set.CaptionFeats == nil {
		table = b.captions.table
	}
	shift := 0.0
	if b.teacher.Process() == family.ProcessFlowMatching {
		shift = r.Diffusion.Shift
	}
	return eval.TeacherOf(b.teacher, table, shift)
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
	if rows, _ := b.teacher.Grid(); rows == 0 {
		// The grid is the recipe's, not the model's: name it.
		return fmt.Sprintf("%s on %d×%d latents, weights sha256 %s", summary(b.teacher), b.rows, b.cols, sum)
	}
	return fmt.Sprintf("%s, weights sha256 %s", summary(b.teacher), sum)
}

package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/textenc"
)

// promptFeatures is encoded training captions laid out as a caption
// table: every caption's feature rows, then the empty prompt's, so that a
// caption is the indices of its rows and the objectives read it through
// the table as they read the shapes captions through theirs.
type promptFeatures struct {
	table []float32
	empty []int // the empty prompt's rows: a dropped caption
}

// attachPromptFeatures lays out the data's encoded captions as the
// model's caption table and gives the data their row indices.
func (m *model) attachPromptFeatures(d *distill.Dataset, set *datasets.Set) error {
	if set.CaptionDim != m.captionDim {
		return fmt.Errorf("pipeline: the data's caption features are %d wide, the model reads %d", set.CaptionDim, m.captionDim)
	}
	if set.EmptyCaptionFeats == nil {
		return fmt.Errorf("pipeline: the data's encoded captions come without the empty prompt's (tensor %q), which caption dropout needs", datasets.EmptyCaptionFeatsKey)
	}
	dim := set.CaptionDim
	p := &promptFeatures{}
	caps := make([][]int, len(set.CaptionFeats))
	row := 0
	for i, f := range set.CaptionFeats {
		for range len(f) / dim {
			caps[i] = append(caps[i], row)
			row++
		}
		p.table = append(p.table, f...)
	}
	for range len(set.EmptyCaptionFeats) / dim {
		p.empty = append(p.empty, row)
		row++
	}
	p.table = append(p.table, set.EmptyCaptionFeats...)
	if err := d.WithCaptions(caps, row); err != nil {
		return err
	}
	d.EmptyCaption = p.empty
	m.prompts = p
	return nil
}

// trainingTable is the caption table the objectives read: the encoded
// captions' when the data has them, else the model's.
func (m *model) trainingTable() ([]float32, []int) {
	if m.prompts != nil {
		return m.prompts.table, m.prompts.empty
	}
	return m.captions.table, nil
}

// promptTeacherData samples d.Samples latents from a caption-conditioned
// base (a Z-Image, named id) for the prompts of data.prompts (sample i for prompt i mod their
// count), each encoded by the text encoder of the base's repository, as
// captionTeacherData samples for the shapes captions; the set records the
// prompts' features and the empty prompt's. It reuses path when it holds
// samples drawn with the same settings, prompts file (by SHA-256) and text
// encoder.
func promptTeacherData(path string, b *base, id string, r *recipes.Recipe, seed uint64, logf func(string, ...any)) (*datasets.Set, error) {
	d := r.Data
	te, tok, ok := textenc.Locate(r.BasePath())
	if !ok {
		return nil, fmt.Errorf("pipeline: data.prompts: no text_encoder/ and tokenizer/ folders in the repository of the base %s, expected the base's transformer inside a Z-Image repository", r.BasePath())
	}
	promptsSum, err := fileSHA256(r.PromptsPath())
	if err != nil {
		return nil, fmt.Errorf("pipeline: data.prompts: %w", err)
	}
	encID, err := folderIdentity(te, tok)
	if err != nil {
		return nil, fmt.Errorf("pipeline: data.prompts: %w", err)
	}
	key := fmt.Sprintf("zimage teacher prompts sha256 %s samples=%d steps=%d cfg=%g shift=%g/%d seed=%d text_encoder=%s teacher=%s",
		promptsSum, d.Samples, d.SamplingSteps, d.CFG, r.Diffusion.Shift, r.Diffusion.Steps, seed, encID, id)
	if s, ok := cachedData(path, key); ok && s.CaptionFeats != nil {
		logf("data: reusing %d teacher samples for the prompts from %s", s.N, path)
		return s, nil
	}
	prompts, err := textenc.ReadPrompts(r.PromptsPath())
	if err != nil {
		return nil, fmt.Errorf("pipeline: data.prompts: %w", err)
	}
	dim := b.teacher.Conditioning().CaptionWidth
	feats, empty, err := encodePrompts(te, tok, prompts, dim, logf)
	if err != nil {
		return nil, err
	}
	set := &datasets.Set{N: d.Samples, C: b.teacher.InChannels(), H: b.rows, W: b.cols, NumClasses: 1, Labels: make([]int, d.Samples),
		CaptionDim: dim, EmptyCaptionFeats: empty, Metadata: map[string]string{"dcdit.generated_by": key}}
	for i := range d.Samples {
		set.CaptionFeats = append(set.CaptionFeats, feats[i%len(feats)])
	}
	caption := func(f []float32) cond.Caption { return cond.Caption{Features: f, Len: len(f) / dim} }
	logf("data: sampling %d latents from the caption-conditioned teacher for %d prompts (%d Euler steps, cfg %g)", d.Samples, len(prompts), d.SamplingSteps, d.CFG)
	set.Latents, err = sampleCaptionTeacher(b, r, seed, logf, func(lo, n int) ([]cond.Caption, []cond.Caption, error) {
		pos := make([]cond.Caption, n)
		for i := range pos {
			pos[i] = caption(set.CaptionFeats[lo+i])
		}
		return pos, slices.Repeat([]cond.Caption{caption(empty)}, n), nil
	})
	if err != nil {
		return nil, err
	}
	if err := datasets.Write(path, set); err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	return set, nil
}

// encodePrompts encodes the prompts and the empty prompt with the text
// encoder at te and the tokenizer at tok, checking the width against the
// transformer's dim, and lets the encoder go before the teacher samples:
// a real one is as large as the transformer.
func encodePrompts(te, tok string, prompts []string, dim int, logf func(string, ...any)) ([][]float32, []float32, error) {
	enc, err := textenc.Open(te, tok)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: data.prompts: %w", err)
	}
	if enc.Dim() != dim {
		return nil, nil, fmt.Errorf("pipeline: data.prompts: the text encoder %s writes %d-wide features, the base reads caption features %d wide", te, enc.Dim(), dim)
	}
	logf("data: encoding %d prompts with the text encoder %s", len(prompts), te)
	feats, err := enc.Encode(append(slices.Clone(prompts), ""), func(w string) { logf("data: %s", w) }, nil)
	// The encoder is unreachable from here on. Twice: the first
	// collection queues its finalizers, the second frees what they
	// release.
	for range 2 {
		runtime.GC()
		debug.FreeOSMemory()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: data.prompts: %w", err)
	}
	return feats[:len(prompts)], feats[len(prompts)], nil
}

// fileSHA256 is the hex SHA-256 of a file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxHashedFile bounds the files folderIdentity reads whole: configs and
// tokenizers; weights above it are named by size and modification time,
// since reading gigabytes on every run to find the cache valid would cost
// more than the check is worth.
const maxHashedFile = 64 << 20

// folderIdentity names the files under the folders (the text encoder and
// its tokenizer) by a SHA-256 over each file's path within its folder, its
// size and either its bytes or, above maxHashedFile, its modification time.
func folderIdentity(dirs ...string) (string, error) {
	h := sha256.New()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			st, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(h, "%s\x00%s\x00%d\x00", filepath.Base(dir), rel, st.Size())
			if st.Size() > maxHashedFile {
				fmt.Fprintf(h, "%d\x00", st.ModTime().UnixNano())
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(h, f)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	return "sha256 " + hex.EncodeToString(h.Sum(nil))[:16], nil
}

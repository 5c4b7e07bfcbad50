package shapes

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/cond"
)

// Vocabulary is the captions' words in token order: the article and the
// size and position words, then Classes, then Palette.
var Vocabulary = append(append([]string{"a", "small", "large", "on", "left", "right", "top", "bottom", "centre"}, Classes...), Palette...)

// Caption options: which of the optional phrases a caption carries
// (CaptionVariants of them, from "a red disc" to "a small red disc on
// black at the left").
const (
	captionSize = 1 << iota
	captionBackground
	captionPosition
	// CaptionVariants is the number of caption forms.
	CaptionVariants = 1 << iota
)

// MaxCaptionWords is the longest caption's length in words (the form with
// every optional phrase): what a model's cost per image is counted for.
const MaxCaptionWords = 7

// Caption describes a sample in words: "a", its size ("small" below a
// radius of 35% of the side, "large" from there), its foreground colour
// and class, "on" its background colour, and its position ("left",
// "right", "top" or "bottom", whichever way its centre is furthest off
// the middle once that is more than 5% of the side, else "centre"). The
// class and colour are always said; variant (0 ≤ variant <
// CaptionVariants) chooses which of size, background and position are,
// so that captions have different lengths (3 to 7 words).
func Caption(s Sample, variant int) ([]string, error) {
	if variant < 0 || variant >= CaptionVariants {
		return nil, fmt.Errorf("shapes: caption variant %d outside [0, %d)", variant, CaptionVariants)
	}
	if s.Side == 0 {
		return nil, fmt.Errorf("shapes: caption of a sample without its geometry")
	}
	words := []string{"a"}
	if variant&captionSize != 0 {
		size := "large"
		if 100*s.Radius < 35*s.Side {
			size = "small"
		}
		words = append(words, size)
	}
	words = append(words, Palette[s.Foreground], Classes[s.Label])
	if variant&captionBackground != 0 {
		words = append(words, "on", Palette[s.Background])
	}
	if variant&captionPosition != 0 {
		words = append(words, position(s))
	}
	return words, nil
}

// position is the caption's position word.
func position(s Sample) string {
	dx, dy := 2*s.Centre[0]-s.Side, 2*s.Centre[1]-s.Side // twice the offset from the middle
	if max(abs(dx), abs(dy))*100 <= 2*5*s.Side {
		return "centre"
	}
	switch {
	case abs(dx) >= abs(dy) && dx < 0:
		return "left"
	case abs(dx) >= abs(dy):
		return "right"
	case dy < 0:
		return "top"
	}
	return "bottom"
}

// Tokens maps words to their Vocabulary indices, naming any word the
// vocabulary lacks.
func Tokens(words []string) ([]int, error) {
	index := make(map[string]int, len(Vocabulary))
	for i, w := range Vocabulary {
		index[w] = i
	}
	out := make([]int, len(words))
	for i, w := range words {
		t, ok := index[w]
		if !ok {
			return nil, fmt.Errorf("shapes: word %q (word %d of the caption) is not in the vocabulary", w, i+1)
		}
		out[i] = t
	}
	return out, nil
}

// EmbeddingTable is the fixed table that stands in for a text encoder:
// row t ([dim] values) embeds Vocabulary[t], its values uniform on
// [−√3, √3) (unit variance) in steps of 2^−23·√3, drawn by a PCG stream of
// (seed, t) in integer arithmetic, so that (dim, seed) gives the same
// table bit for bit on every machine. A text-conditioned toy model reads a caption
// as its words' rows, in order ([len, dim]), as Z-Image reads its text
// encoder's hidden states.
func EmbeddingTable(dim int, seed uint64) []float32 {
	table := make([]float32, len(Vocabulary)*dim)
	for t := range Vocabulary {
		rs := stream{rand.NewPCG(splitmix64(seed), splitmix64(seed^splitmix64(uint64(t)+0x5851f42d4c957f2d)))}
		for d := range dim {
			k := int32(rs.pcg.Uint64()>>40) - 1<<23 // in [−2^23, 2^23)
			table[t*dim+d] = float32(k) / (1 << 23) * sqrt3
		}
	}
	return table
}

// sqrt3 scales uniform [−1, 1) values to unit variance.
const sqrt3 = 1.7320508

// Embed returns a caption's features [len(words), dim] from table (as
// EmbeddingTable makes it).
func Embed(words []string, table []float32, dim int) ([]float32, error) {
	if dim < 1 || len(table) != len(Vocabulary)*dim {
		return nil, fmt.Errorf("shapes: embedding table of %d values, want %d words × dim %d", len(table), len(Vocabulary), dim)
	}
	toks, err := Tokens(words)
	if err != nil {
		return nil, err
	}
	out := make([]float32, 0, len(toks)*dim)
	for _, t := range toks {
		out = append(out, table[t*dim:(t+1)*dim]...)
	}
	return out, nil
}

// CaptionTableKey is the metadata key under which a model trained on the
// shapes captions records its text-encoder stand-in (CaptionTable, as
// JSON), so that a sampler turns prompts into the features it trained on.
const CaptionTableKey = "dcdit.captions"

// CaptionTable describes an embedding table: the vocabulary it covers and
// EmbeddingTable's width and seed, which rebuild it bit for bit.
type CaptionTable struct {
	Vocabulary []string `json:"vocabulary"`
	Dim        int      `json:"dim"`
	Seed       uint64   `json:"seed"`
}

// NewCaptionTable describes the table of width dim from seed over
// Vocabulary.
func NewCaptionTable(dim int, seed uint64) CaptionTable {
	return CaptionTable{Vocabulary: slices.Clone(Vocabulary), Dim: dim, Seed: seed}
}

// Table rebuilds the table; a record of another vocabulary (one this
// version of the words does not have) is refused.
func (c CaptionTable) Table() ([]float32, error) {
	if !slices.Equal(c.Vocabulary, Vocabulary) {
		return nil, fmt.Errorf("shapes: the caption table covers a vocabulary of %d words, this version's has %d (%s …)",
			len(c.Vocabulary), len(Vocabulary), strings.Join(Vocabulary[:4], " "))
	}
	if c.Dim < 1 {
		return nil, fmt.Errorf("shapes: caption table width %d, want ≥ 1", c.Dim)
	}
	return EmbeddingTable(c.Dim, c.Seed), nil
}

// Prompt returns the features of a prompt (words separated by spaces)
// from table: its words' rows, or one zero row for the empty prompt, the
// unconditional caption a model is trained with (distill's
// CaptionFeatures).
func Prompt(prompt string, table []float32, dim int) ([]float32, error) {
	words := strings.Fields(prompt)
	if len(words) == 0 {
		return make([]float32, dim), nil
	}
	return Embed(words, table, dim)
}

// CaptionTableFrom reads the caption table a model's metadata records
// under CaptionTableKey and rebuilds it, checking its width against the
// model's caption feature width dim; found is false when the metadata has
// none.
func CaptionTableFrom(meta map[string]string, dim int) (ct CaptionTable, table []float32, found bool, err error) {
	raw, ok := meta[CaptionTableKey]
	if !ok {
		return ct, nil, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &ct); err != nil {
		return ct, nil, true, fmt.Errorf("metadata %q: %v", CaptionTableKey, err)
	}
	if ct.Dim != dim {
		return ct, nil, true, fmt.Errorf("its caption table is %d wide, the model reads %d features", ct.Dim, dim)
	}
	if table, err = ct.Table(); err != nil {
		return ct, nil, true, err
	}
	return ct, table, true, nil
}

// CaptionFeatures turns captions (vocabulary indices) into a model's
// caption input: one row of table (dim wide) per word, and one zero row
// for an empty caption.
func CaptionFeatures(caps [][]int, table []float32, dim int) ([][]float32, error) {
	if dim < 1 || len(table)%dim != 0 {
		return nil, fmt.Errorf("shapes: caption table of %d values is not rows of %d", len(table), dim)
	}
	words := len(table) / dim
	out := make([][]float32, len(caps))
	for i, c := range caps {
		if len(c) == 0 {
			out[i] = make([]float32, dim)
			continue
		}
		f := make([]float32, 0, len(c)*dim)
		for _, w := range c {
			if w < 0 || w >= words {
				return nil, fmt.Errorf("shapes: caption %d has word %d, outside the table's %d", i, w, words)
			}
			f = append(f, table[w*dim:(w+1)*dim]...)
		}
		out[i] = f
	}
	return out, nil
}

// CaptionInputs is CaptionFeatures as a backbone's conditioning: one
// cond.Caption per caption, every row valid.
func CaptionInputs(caps [][]int, table []float32, dim int) ([]cond.Caption, error) {
	feats, err := CaptionFeatures(caps, table, dim)
	if err != nil {
		return nil, err
	}
	out := make([]cond.Caption, len(feats))
	for i, f := range feats {
		out[i] = cond.Caption{Features: f, Len: len(f) / dim}
	}
	return out, nil
}

// Package textenc turns prompts into the caption features a Z-Image
// transformer reads, as the Z-Image pipelines compute them: each prompt
// rendered by the tokenizer's chat template (a user message, the
// generation prompt, thinking enabled), encoded by Qwen3's byte-level BPE
// (package textenc/bpe) and cut at MaxLength tokens, run through the Qwen3
// text encoder (package textenc/qwen3), and hidden_states[-2] kept for
// the prompt's real tokens. It also reads the components from a model
// repository laid out as Z-Image-Turbo's (text_encoder/, tokenizer/) and
// writes the captions files `dcdit sample --captions` reads.
package textenc

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/textenc/bpe"
	"github.com/dcdit/dcdit/textenc/qwen3"
)

// MaxLength is the pipelines' max_sequence_length: the tokens of a
// rendered prompt the text encoder reads.
const MaxLength = 512

// batchPrompts bounds the prompts encoded together, and so the encoder's
// activations.
const batchPrompts = 8

// Tensor names of a captions file.
const (
	CapFeatsKey = "cap_feats"
	CapLensKey  = "cap_lens"
)

// Encoder is a tokenizer and its text encoder.
type Encoder struct {
	Tokenizer *bpe.Tokenizer
	Model     *qwen3.Model
	// MaxLength is the tokens read per prompt (default MaxLength).
	MaxLength int
}

// Locate finds the text encoder and tokenizer folders of the repository
// that path belongs to: path itself, or its parent when path is the
// repository's transformer/ folder or a file inside it. ok is false when
// either is missing.
func Locate(path string) (textEncoder, tokenizer string, ok bool) {
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	}
	for _, root := range []string{dir, filepath.Dir(dir)} {
		te, tok := filepath.Join(root, "text_encoder"), filepath.Join(root, "tokenizer")
		if isDir(te) && isDir(tok) {
			return te, tok, true
		}
	}
	return "", "", false
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Open loads the text encoder (a text_encoder/ folder, a single file, or a
// repository holding text_encoder/) and the tokenizer (a tokenizer/
// folder, or a repository holding tokenizer/).
func Open(textEncoder, tokenizer string) (*Encoder, error) {
	if sub := filepath.Join(tokenizer, "tokenizer"); isDir(sub) {
		tokenizer = sub
	}
	tok, err := bpe.Load(tokenizer)
	if err != nil {
		return nil, err
	}
	m, err := qwen3.Open(textEncoder)
	if err != nil {
		return nil, err
	}
	if v := m.Config.VocabSize; tok.Len() > v {
		return nil, fmt.Errorf("textenc: the tokenizer %s has %d tokens but the text encoder %s embeds %d", tokenizer, tok.Len(), textEncoder, v)
	}
	return &Encoder{Tokenizer: tok, Model: m, MaxLength: MaxLength}, nil
}

// Dim is the width of a caption feature (the encoder's hidden size).
func (e *Encoder) Dim() int { return e.Model.Config.HiddenSize }

// Encode returns each prompt's caption features, [tokens, Dim()]
// row-major. warn, when set, receives the prompts cut at MaxLength.
// progress, when set, is called with the prompts encoded and the total.
func (e *Encoder) Encode(prompts []string, warn func(string), progress func(done, total int)) ([][]float32, error) {
	maxLen := e.MaxLength
	if maxLen <= 0 {
		maxLen = MaxLength
	}
	out := make([][]float32, 0, len(prompts))
	for lo := 0; lo < len(prompts); lo += batchPrompts {
		hi := min(lo+batchPrompts, len(prompts))
		ids := make([][]int, 0, hi-lo)
		for _, p := range prompts[lo:hi] {
			t, w, err := e.Tokenizer.EncodePrompt(p, maxLen)
			if err != nil {
				return nil, err
			}
			if w != "" && warn != nil {
				warn(w)
			}
			ids = append(ids, t)
		}
		feats, err := e.Model.PromptEmbeds(ids)
		if err != nil {
			return nil, err
		}
		out = append(out, feats...)
		if progress != nil {
			progress(hi, len(prompts))
		}
	}
	return out, nil
}

// WriteCaptions writes caption features (each [len_i, dim]) as a captions
// file, atomically: cap_feats F32 [N, L, dim] padded with zeros to the
// longest caption L, and cap_lens I64 [N].
func WriteCaptions(path string, feats [][]float32, dim int, metadata map[string]string) error {
	if len(feats) == 0 || dim < 1 {
		return fmt.Errorf("textenc: %s: no captions to write", path)
	}
	L := 0
	for i, f := range feats {
		if len(f) == 0 || len(f)%dim != 0 {
			return fmt.Errorf("textenc: %s: caption %d has %d values, want a positive multiple of %d", path, i, len(f), dim)
		}
		L = max(L, len(f)/dim)
	}
	padded := make([]float32, len(feats)*L*dim)
	lens := make([]byte, 8*len(feats))
	for i, f := range feats {
		copy(padded[i*L*dim:], f)
		binary.LittleEndian.PutUint64(lens[8*i:], uint64(len(f)/dim))
	}
	return safetensors.Write(path, []safetensors.WriteTensor{
		{Name: CapFeatsKey, DType: dtype.F32, Shape: []int64{int64(len(feats)), int64(L), int64(dim)}, Data: dtype.F32Bytes(padded)},
		{Name: CapLensKey, DType: dtype.I64, Shape: []int64{int64(len(feats))}, Data: lens},
	}, metadata)
}

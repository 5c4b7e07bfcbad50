package sample

import (
	"fmt"
	"time"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/textenc"
)

// textEncoderPaths returns the text encoder and tokenizer that --prompt
// runs through: --text-encoder (and --tokenizer, else the one beside it),
// or those of the repository the checkpoint belongs to. ok is false when
// there are none: --prompt then reads a dcdit-trained toy's caption table.
func textEncoderPaths(opts *Options) (te, tok string, ok bool, err error) {
	if opts.TextEncoder != "" {
		tok = opts.Tokenizer
		if tok == "" {
			if _, tok, ok = textenc.Locate(opts.TextEncoder); !ok {
				return "", "", false, fmt.Errorf("--text-encoder %s: no tokenizer/ beside it: give --tokenizer", opts.TextEncoder)
			}
		}
		return opts.TextEncoder, tok, true, nil
	}
	if opts.Tokenizer != "" {
		return "", "", false, fmt.Errorf("--tokenizer goes with --text-encoder")
	}
	te, tok, ok = textenc.Locate(opts.Checkpoint)
	return te, tok, ok, nil
}

// encodePrompts runs --prompt and --negative-prompt through the model
// repository's text encoder, before the transformer is loaded, so that the
// two never sit in memory together. It returns nil captions when there is
// no text encoder to run.
func encodePrompts(opts *Options) (pos, neg *captions, err error) {
	if len(opts.Prompts) == 0 {
		if opts.NegativePrompt != "" {
			return nil, nil, fmt.Errorf("--negative-prompt goes with --prompt")
		}
		return nil, nil, nil
	}
	te, tok, ok, err := textEncoderPaths(opts)
	if err != nil || !ok {
		return nil, nil, err
	}
	begin := time.Now()
	start := begin
	enc, err := textenc.Open(te, tok)
	if err != nil {
		return nil, nil, err
	}
	cmdutil.Phase(quietLog(opts), "loaded the text encoder "+te, time.Since(start))
	warn := func(s string) {
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", s)
		}
	}
	for i, p := range opts.Prompts {
		if p == "" {
			return nil, nil, fmt.Errorf("--prompt %d is empty", i+1)
		}
	}
	all := append(append([]string(nil), opts.Prompts...), opts.NegativePrompt)
	start = time.Now()
	feats, err := enc.Encode(all, warn, nil)
	if err != nil {
		return nil, nil, err
	}
	cmdutil.Phase(quietLog(opts), fmt.Sprintf("encoded %d prompts", len(all)), time.Since(start))
	D := enc.Dim()
	enc = nil
	cmdutil.ReleaseMemory()
	cmdutil.Phase(quietLog(opts), "text encoder done and released", time.Since(begin))
	pos, neg = &captions{}, &captions{}
	for i, f := range feats {
		c := pos
		if i == len(opts.Prompts) {
			c = neg
		}
		c.feats, c.lens = append(c.feats, f), append(c.lens, len(f)/D)
		c.padded = max(c.padded, len(f)/D)
	}
	// The pipelines repeat one negative prompt for every sample.
	for range len(opts.Prompts) - 1 {
		neg.feats, neg.lens = append(neg.feats, neg.feats[0]), append(neg.lens, neg.lens[0])
	}
	pos.dim, neg.dim = D, D
	return pos, neg, nil
}

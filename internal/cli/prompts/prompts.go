// Package prompts implements `dcdit encode-prompts`: a file of prompts
// through the Qwen3 text encoder into the captions file that Z-Image
// sampling, distillation and evaluation read.
package prompts

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/textenc"
)

// Options are the flags and arguments of `dcdit encode-prompts`.
type Options struct {
	IO          *iostreams.IO
	Prompts     string
	TextEncoder string
	Tokenizer   string
	Out         string
	MaxLength   int
	Quiet       bool
}

// NewCmd returns the encode-prompts command. runF replaces the action in
// tests that only check flag parsing; nil encodes.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "encode-prompts PROMPTS.txt --text-encoder DIR",
		Short: "Encode a file of prompts with the Qwen3 text encoder into a Z-Image captions file",
		Long: `Encode-prompts reads PROMPTS.txt (UTF-8, one prompt per line) and computes what
the Z-Image pipelines condition on: each prompt rendered by the tokenizer's
chat template (a user message, the generation prompt, thinking enabled),
tokenized by Qwen3's byte-level BPE and cut at --max-length tokens (a
warning names each prompt cut), run through the Qwen3 text encoder, and
hidden_states[-2] kept for the prompt's tokens.

--text-encoder is a text_encoder/ folder (config.json and safetensors,
sharded or not), a single file such as ComfyUI's qwen_3_4b.safetensors, or
a model repository holding text_encoder/ and tokenizer/ (Z-Image-Turbo/);
--tokenizer is a tokenizer/ folder (tokenizer.json, tokenizer_config.json),
found beside the text encoder when not given. BF16 weights stay BF16 in
memory.

The output, written atomically, is what 'dcdit sample --captions' reads:
cap_feats F32 [N, L, D] (each prompt's rows, zero-padded to the longest) and
cap_lens I64 [N].`,
		Example: `  dcdit encode-prompts prompts.txt --text-encoder Z-Image-Turbo/ --out caps.safetensors
  dcdit encode-prompts prompts.txt --text-encoder qwen_3_4b.safetensors --tokenizer Z-Image-Turbo/tokenizer --out caps.safetensors`,
		Args: cmdutil.ExactArgs(1, "the PROMPTS file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Prompts = args[0]
			switch {
			case opts.TextEncoder == "":
				return cmdutil.Usagef(cmd, "--text-encoder is required (a text_encoder/ folder, a single file, or the model repository)")
			case opts.Out == "":
				return cmdutil.Usagef(cmd, "--out: want a file name")
			case opts.MaxLength < 1:
				return cmdutil.Usagef(cmd, "--max-length %d: want ≥ 1", opts.MaxLength)
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.TextEncoder, "text-encoder", "", "text encoder folder or file, or the model repository (required)")
	f.StringVar(&opts.Tokenizer, "tokenizer", "", "tokenizer folder (default: the one beside the text encoder)")
	f.StringVar(&opts.Out, "out", "captions.safetensors", "captions file to write")
	f.IntVar(&opts.MaxLength, "max-length", textenc.MaxLength, "tokens read per prompt, chat template included")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors")
	return cmd
}

// Run encodes the prompts and writes the captions file.
func Run(opts *Options) error {
	if err := cmdutil.CheckWritable("--out", opts.Out); err != nil {
		return err
	}
	ps, err := textenc.ReadPrompts(opts.Prompts)
	if err != nil {
		return err
	}
	enc, err := OpenEncoder(opts.TextEncoder, opts.Tokenizer)
	if err != nil {
		return err
	}
	enc.MaxLength = opts.MaxLength
	warn := func(s string) {
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", s)
		}
	}
	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "encoding prompts", len(ps))
	}
	start := time.Now()
	feats, err := enc.Encode(ps, warn, func(done, _ int) { bar.Set(done) })
	bar.Finish()
	if err != nil {
		return err
	}
	md := map[string]string{"dcdit.prompts": opts.Prompts, "dcdit.text_encoder": enc.Model.Source,
		"dcdit.max_length": strconv.Itoa(enc.MaxLength)}
	if err := textenc.WriteCaptions(opts.Out, feats, enc.Dim(), md); err != nil {
		return err
	}
	if !opts.Quiet {
		tokens := 0
		for _, f := range feats {
			tokens += len(f) / enc.Dim()
		}
		fmt.Fprintf(opts.IO.Out, "wrote %s: %d prompts, %d tokens, %d features each, in %s\n", opts.Out, len(ps), tokens, enc.Dim(), progress.Duration(time.Since(start)))
	}
	return nil
}

// OpenEncoder opens the text encoder at textEncoder and the tokenizer at
// tokenizer, or, when tokenizer is empty, the tokenizer/ beside the text
// encoder (in the same repository).
func OpenEncoder(textEncoder, tokenizer string) (*textenc.Encoder, error) {
	if tokenizer == "" {
		_, tok, ok := textenc.Locate(textEncoder)
		if !ok {
			return nil, fmt.Errorf("no tokenizer/ folder beside %s: give --tokenizer", textEncoder)
		}
		tokenizer = tok
	}
	return textenc.Open(textEncoder, tokenizer)
}

// Package bpe holds the byte-level BPE tokenizer of Qwen2/Qwen3 text
// encoders, read from a HuggingFace tokenizer folder (tokenizer.json and
// tokenizer_config.json), and the prompt rendering of the Z-Image pipelines.
//
// Encoding follows the HuggingFace tokenizers library exactly: added and
// special tokens are matched first on the raw text (leftmost-longest,
// case-sensitive); every other segment is NFC-normalised and split by Qwen's
// pre-tokenizer pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (hand-written, since RE2 has no lookahead; \s is Unicode White_Space);
// each piece's UTF-8 bytes are mapped to the GPT-2 byte alphabet and merged
// by rank. Decoding maps tokens back to bytes and replaces each maximal
// invalid UTF-8 subsequence with U+FFFD.
//
// A tokenizer.json is accepted only in the configuration this package
// implements (NFC, that split pattern, ByteLevel, BPE without dropout,
// unknown token or byte fallback) and is validated strictly: every merge
// must join two vocabulary symbols into a third, and the ids of the
// vocabulary and the added tokens must be 0…n−1 without holes.
//
// The chat template is recognised by its SHA-256, not interpreted: a
// template this package does not know is refused rather than rendered
// wrong. For the Qwen3 template, the rendering the Z-Image pipelines ask for
// (one user message, generation prompt, enable_thinking=True) is
//
//	<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n
//
// with the prompt inserted verbatim. EncodePrompt truncates on the right to
// the pipelines' max_length and Pad right-pads with the pad token.
package bpe

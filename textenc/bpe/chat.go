package bpe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// qwen3TemplateSHA256 is the SHA-256 of the Qwen3 chat template (the one
// shipped with Qwen3-4B, the Z-Image text encoder), the only template
// ChatPrompt renders.
const qwen3TemplateSHA256 = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

// ChatPrompt renders prompt as the Z-Image pipelines do:
// apply_chat_template([{"role": "user", "content": prompt}],
// add_generation_prompt=True, enable_thinking=True). With the Qwen3
// template that is the user turn and the assistant header, without a
// <think> block; the prompt is inserted verbatim. Any other template is
// refused.
func (t *Tokenizer) ChatPrompt(prompt string) (string, error) {
	if t.template == "" {
		if t.templateFile == "" {
			return "", errors.New("bpe: no tokenizer_config.json was loaded, so there is no chat template to render the prompt with")
		}
		return "", fmt.Errorf("bpe: %s: there is no \"chat_template\" to render the prompt with", t.templateFile)
	}
	sum := sha256.Sum256([]byte(t.template))
	if got := hex.EncodeToString(sum[:]); got != qwen3TemplateSHA256 {
		return "", fmt.Errorf("bpe: %s: the chat template (sha256 %s) is not the Qwen3 template (sha256 %s), the only one this package renders; refusing to guess how it renders a prompt", t.templateFile, got, qwen3TemplateSHA256)
	}
	return "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n", nil
}

// EncodePrompt renders prompt with ChatPrompt and encodes it as the
// pipelines' tokenizer call does (truncation=True, max_length=maxLen, on
// the right): the ids beyond maxLen are dropped, which can drop the end of
// the template too. warning is "" unless that happened; then it names the
// prompt and what was cut. An empty prompt is valid (the default negative
// prompt). The ids are not padded: see Pad.
func (t *Tokenizer) EncodePrompt(prompt string, maxLen int) (ids []int, warning string, err error) {
	if maxLen <= 0 {
		return nil, "", fmt.Errorf("bpe: max length %d, want a positive number of tokens", maxLen)
	}
	text, err := t.ChatPrompt(prompt)
	if err != nil {
		return nil, "", err
	}
	ids, err = t.Encode(text)
	if err != nil {
		return nil, "", fmt.Errorf("bpe: prompt %s: %w", shorten(prompt, 60), err)
	}
	if len(ids) <= maxLen {
		return ids, "", nil
	}
	dropped, err := t.Decode(ids[maxLen:], false)
	if err != nil {
		return nil, "", err
	}
	warning = fmt.Sprintf("prompt %s is %d tokens with the chat template, more than the %d the text encoder reads: truncated as the Z-Image pipelines do, dropping %s",
		shorten(prompt, 60), len(ids), maxLen, shorten(dropped, 60))
	return ids[:maxLen], warning, nil
}

// PadID returns the id of tokenizer_config.json's pad_token.
func (t *Tokenizer) PadID() (int, bool) { return t.padID, t.padID >= 0 }

// Pad right-pads ids to maxLen with the pad token, as the pipelines'
// padding="max_length" does, and returns the attention mask (1 on the
// first len(ids) positions, 0 on the padding).
func (t *Tokenizer) Pad(ids []int, maxLen int) (inputIDs, attentionMask []int, err error) {
	if len(ids) > maxLen {
		return nil, nil, fmt.Errorf("bpe: pad: %d ids are more than the max length %d (truncate first)", len(ids), maxLen)
	}
	if t.padID < 0 {
		return nil, nil, errors.New("bpe: pad: the tokenizer has no pad_token (it comes from tokenizer_config.json)")
	}
	inputIDs = make([]int, maxLen)
	attentionMask = make([]int, maxLen)
	copy(inputIDs, ids)
	for i := range inputIDs {
		if i < len(ids) {
			attentionMask[i] = 1
		} else {
			inputIDs[i] = t.padID
		}
	}
	return inputIDs, attentionMask, nil
}

// shorten quotes s, cut to its first n characters.
func shorten(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", string(rs[:n]))
}

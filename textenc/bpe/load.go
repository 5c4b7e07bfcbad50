package bpe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// SplitPattern is the pre-tokenizer regex of the Qwen2/Qwen3 tokenizers,
// the only Split pattern this package implements.
const SplitPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Load reads a tokenizer folder: tokenizer.json, and tokenizer_config.json
// when present (it supplies the chat template and the pad token; without
// it ChatPrompt and Pad report what is missing). A template saved beside
// it as chat_template.jinja is used when the config has none.
func Load(dir string) (*Tokenizer, error) {
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if _, err := os.Stat(cfg); errors.Is(err, os.ErrNotExist) {
		cfg = ""
	}
	t, err := LoadFiles(filepath.Join(dir, "tokenizer.json"), cfg)
	if err != nil {
		return nil, err
	}
	if t.template == "" {
		jinja := filepath.Join(dir, "chat_template.jinja")
		text, err := os.ReadFile(jinja)
		switch {
		case err == nil:
			t.template, t.templateFile = string(text), jinja
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("bpe: %w", err)
		}
	}
	return t, nil
}

// LoadFiles reads a tokenizer.json and, unless configJSON is "", the
// tokenizer_config.json that goes with it.
func LoadFiles(tokenizerJSON, configJSON string) (*Tokenizer, error) {
	text, err := os.ReadFile(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	t, err := parseTokenizer(text)
	if err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", tokenizerJSON, err)
	}
	t.templateFile = configJSON
	if configJSON == "" {
		return t, nil
	}
	text, err = os.ReadFile(configJSON)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	if err := t.parseConfig(text, tokenizerJSON); err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", configJSON, err)
	}
	return t, nil
}

type tokenizerFile struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         *modelJSON       `json:"model"`
}

type addedTokenJSON struct {
	ID         *int    `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
	Special    bool    `json:"special"`
}

type modelJSON struct {
	Type                    string     `json:"type"`
	Dropout                 *float64   `json:"dropout"`
	UnkToken                *string    `json:"unk_token"`
	ContinuingSubwordPrefix *string    `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string    `json:"end_of_word_suffix"`
	FuseUnk                 bool       `json:"fuse_unk"`
	ByteFallback            bool       `json:"byte_fallback"`
	IgnoreMerges            bool       `json:"ignore_merges"`
	Vocab                   vocabJSON  `json:"vocab"`
	Merges                  mergesJSON `json:"merges"`
}

// component is the part of a normalizer, pre-tokenizer, post-processor or
// decoder entry that this package reads.
type component struct {
	Type           string          `json:"type"`
	Pretokenizers  []component     `json:"pretokenizers"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       bool            `json:"use_regex"`
}

func parseTokenizer(text []byte) (*Tokenizer, error) {
	var f tokenizerFile
	if err := json.Unmarshal(text, &f); err != nil {
		return nil, err
	}
	if err := checkPipeline(&f); err != nil {
		return nil, err
	}
	m := f.Model
	if m.Vocab == nil {
		return nil, errors.New(`"model.vocab" is missing`)
	}
	if m.Merges == nil {
		return nil, errors.New(`"model.merges" is missing`)
	}
	t := &Tokenizer{cache: make(map[string][]int32), padID: -1}
	if err := t.buildVocab(m.Vocab, f.AddedTokens); err != nil {
		return nil, err
	}
	if err := t.buildMerges(m.Merges); err != nil {
		return nil, err
	}
	t.buildBytes()
	return t, nil
}

// checkPipeline refuses every tokenizer.json setting this package does not
// implement, so that an unknown configuration fails at load instead of
// encoding differently.
func checkPipeline(f *tokenizerFile) error {
	m := f.Model
	if m == nil {
		return errors.New(`"model" is missing`)
	}
	if m.Type != "BPE" {
		return fmt.Errorf(`"model.type" is %q, want "BPE"`, m.Type)
	}
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf(`"model.dropout" is %g: BPE dropout is not implemented`, *m.Dropout)
	case m.UnkToken != nil:
		return fmt.Errorf(`"model.unk_token" is %q: an unknown token is not implemented (want null)`, *m.UnkToken)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fmt.Errorf(`"model.continuing_subword_prefix" is %q, want ""`, *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf(`"model.end_of_word_suffix" is %q, want ""`, *m.EndOfWordSuffix)
	case m.FuseUnk:
		return errors.New(`"model.fuse_unk" is true, want false`)
	case m.ByteFallback:
		return errors.New(`"model.byte_fallback" is true, want false`)
	case m.IgnoreMerges:
		return errors.New(`"model.ignore_merges" is true, want false`)
	}
	var norm component
	if err := decodeComponent("normalizer", f.Normalizer, &norm); err != nil {
		return err
	}
	if norm.Type != "NFC" {
		return fmt.Errorf(`"normalizer" is %s, want {"type": "NFC"}`, describe(f.Normalizer))
	}
	var pre component
	if err := decodeComponent("pre_tokenizer", f.PreTokenizer, &pre); err != nil {
		return err
	}
	if err := checkPreTokenizer(pre); err != nil {
		return fmt.Errorf(`"pre_tokenizer": %w`, err)
	}
	if len(f.PostProcessor) > 0 && string(f.PostProcessor) != "null" {
		var post component
		if err := decodeComponent("post_processor", f.PostProcessor, &post); err != nil {
			return err
		}
		if post.Type != "ByteLevel" {
			return fmt.Errorf(`"post_processor" is %s, want null or ByteLevel (a post-processor that adds tokens is not implemented)`, describe(f.PostProcessor))
		}
	}
	var dec component
	if err := decodeComponent("decoder", f.Decoder, &dec); err != nil {
		return err
	}
	if dec.Type != "ByteLevel" {
		return fmt.Errorf(`"decoder" is %s, want ByteLevel`, describe(f.Decoder))
	}
	return nil
}

func decodeComponent(key string, raw json.RawMessage, c *component) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("%q is missing", key)
	}
	if err := json.Unmarshal(raw, c); err != nil {
		return fmt.Errorf("%q: %v", key, err)
	}
	return nil
}

func checkPreTokenizer(pre component) error {
	if pre.Type != "Sequence" || len(pre.Pretokenizers) != 2 {
		return fmt.Errorf("type %q with %d parts, want a Sequence of Split and ByteLevel", pre.Type, len(pre.Pretokenizers))
	}
	split, bl := pre.Pretokenizers[0], pre.Pretokenizers[1]
	if split.Type != "Split" {
		return fmt.Errorf("part 0 is %q, want Split", split.Type)
	}
	var pattern struct {
		Regex *string `json:"Regex"`
	}
	if err := json.Unmarshal(split.Pattern, &pattern); err != nil || pattern.Regex == nil {
		return fmt.Errorf("Split pattern %s, want {\"Regex\": %q}", describe(split.Pattern), SplitPattern)
	}
	if *pattern.Regex != SplitPattern {
		return fmt.Errorf("Split regex %q is not Qwen's %q, the only one implemented", *pattern.Regex, SplitPattern)
	}
	if split.Behavior != "Isolated" || split.Invert {
		return fmt.Errorf("Split behavior %q invert %v, want Isolated, false", split.Behavior, split.Invert)
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex {
		return fmt.Errorf("part 1 is %q with add_prefix_space %v, use_regex %v; want ByteLevel with both false", bl.Type, bl.AddPrefixSpace, bl.UseRegex)
	}
	return nil
}

// describe shortens a JSON value for an error message.
func describe(raw json.RawMessage) string {
	s := string(bytes.Join(bytes.Fields(raw), []byte(" ")))
	if s == "" {
		return "missing"
	}
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:77], "") + "..."
	}
	return s
}

// buildVocab fills the id tables from the BPE vocabulary and the added
// tokens, requiring the ids of both together to be 0…n−1 exactly once.
func (t *Tokenizer) buildVocab(vocab vocabJSON, added []addedTokenJSON) error {
	n := len(vocab)
	seen := make(map[string]int, len(added))
	for i, a := range added {
		switch {
		case a.ID == nil || a.Content == nil:
			return fmt.Errorf(`"added_tokens"[%d]: "id" or "content" is missing`, i)
		case *a.Content == "":
			return fmt.Errorf(`"added_tokens"[%d] (id %d): the content is empty`, i, *a.ID)
		case a.SingleWord || a.LStrip || a.RStrip:
			return fmt.Errorf(`"added_tokens"[%d] %q: single_word, lstrip and rstrip are not implemented (want false)`, i, *a.Content)
		}
		if j, dup := seen[*a.Content]; dup {
			return fmt.Errorf(`"added_tokens"[%d] %q repeats "added_tokens"[%d]`, i, *a.Content, j)
		}
		seen[*a.Content] = i
		if id, ok := vocab[*a.Content]; !ok {
			n++
		} else if int(id) != *a.ID {
			return fmt.Errorf(`"added_tokens"[%d] %q has id %d but "model.vocab" gives it %d`, i, *a.Content, *a.ID, id)
		}
	}
	t.tokens = make([]string, n)
	if err := t.placeVocab(vocab, added, false); err != nil {
		// Map order is random: redo the placement in sorted order so
		// that the error names the same entry every time.
		clear(t.tokens)
		return t.placeVocab(vocab, added, true)
	}
	t.ids = vocab
	t.special = make([]bool, n)
	t.isAdded = make([]bool, n)
	var raw, normed []string
	for _, a := range added {
		t.ids[*a.Content] = int32(*a.ID)
		t.isAdded[*a.ID], t.special[*a.ID] = true, a.Special
		if a.Normalized {
			normed = append(normed, *a.Content)
		} else {
			raw = append(raw, *a.Content)
		}
	}
	t.rawAdded, t.normAdded = newMatcher(raw, t.ids), newMatcher(normed, t.ids)
	for b := range 256 {
		sym := string(byteRune(byte(b)))
		id, ok := t.ids[sym]
		if !ok || t.isAdded[id] {
			return fmt.Errorf(`"model.vocab" lacks the byte-level symbol %q of byte 0x%02X: some texts could not be encoded`, sym, b)
		}
		t.byteID[b] = id
	}
	return nil
}

// placeVocab puts every token at its id in t.tokens, whose length is the
// number of distinct tokens: an id past its end means a hole below it.
func (t *Tokenizer) placeVocab(vocab vocabJSON, added []addedTokenJSON, sorted bool) error {
	n := len(t.tokens)
	stray := ""
	place := func(where, tok string, id int) error {
		switch {
		case id < 0:
			return fmt.Errorf("%s %q: the id %d is negative", where, tok, id)
		case id >= n:
			if stray == "" {
				stray = fmt.Sprintf("%s %q has id %d", where, tok, id)
			}
		case t.tokens[id] != "" && t.tokens[id] != tok:
			return fmt.Errorf("%s %q: id %d is also %q", where, tok, id, t.tokens[id])
		default:
			t.tokens[id] = tok
		}
		return nil
	}
	keys := make([]string, 0, len(vocab))
	for tok := range vocab {
		keys = append(keys, tok)
	}
	if sorted {
		sort.Strings(keys)
	}
	for _, tok := range keys {
		if tok == "" {
			return errors.New(`"model.vocab" has an empty token`)
		}
		if err := place(`"model.vocab"`, tok, int(vocab[tok])); err != nil {
			return err
		}
	}
	for i, a := range added {
		if err := place(fmt.Sprintf(`"added_tokens"[%d]`, i), *a.Content, *a.ID); err != nil {
			return err
		}
	}
	if stray != "" {
		hole := slices.Index(t.tokens, "")
		return fmt.Errorf("no token has id %d but %s: the ids of \"model.vocab\" and \"added_tokens\" must be 0…%d without holes", hole, stray, n-1)
	}
	return nil
}

// buildMerges fills the merge table. Each merge's rank is its index; both
// parts and their concatenation must be vocabulary symbols, and a pair
// may appear once.
func (t *Tokenizer) buildMerges(merges mergesJSON) error {
	t.merges = make(map[uint64]merge, len(merges))
	var joined []byte
	for i, m := range merges {
		a, b := m[0], m[1]
		joined = append(append(joined[:0], a...), b...)
		left, okL := t.ids[a]
		right, okR := t.ids[b]
		id, okJ := t.ids[string(joined)]
		missing := ""
		switch {
		case !okL || t.isAdded[left]:
			missing = a
		case !okR || t.isAdded[right]:
			missing = b
		case !okJ || t.isAdded[id]:
			missing = a + b
		}
		if missing != "" {
			return fmt.Errorf(`"model.merges"[%d] [%q, %q]: %q is not in "model.vocab"`, i, a, b, missing)
		}
		key := pairKey(left, right)
		if prev, dup := t.merges[key]; dup {
			return fmt.Errorf(`"model.merges"[%d] [%q, %q] repeats merge %d`, i, a, b, prev.rank)
		}
		t.merges[key] = merge{rank: int32(i), id: id}
	}
	return nil
}

// buildBytes precomputes the bytes every id decodes to. A token made only
// of byte-alphabet characters stands for those bytes; any other token (an
// added token with characters outside the alphabet) stands for its own
// UTF-8 text, as the ByteLevel decoder does.
func (t *Tokenizer) buildBytes() {
	t.byteOff = make([]int32, len(t.tokens)+1)
	for id, tok := range t.tokens {
		start := len(t.bytes)
		for _, r := range tok {
			b, ok := charByte(r)
			if !ok {
				t.bytes = append(t.bytes[:start], tok...)
				break
			}
			t.bytes = append(t.bytes, b)
		}
		t.byteOff[id+1] = int32(len(t.bytes))
	}
}

type configFile struct {
	ChatTemplate       json.RawMessage `json:"chat_template"`
	PadToken           json.RawMessage `json:"pad_token"`
	SplitSpecialTokens bool            `json:"split_special_tokens"`
	AddedTokensDecoder map[string]struct {
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens_decoder"`
}

// parseConfig reads the chat template and the pad token, and checks that
// the config's added tokens are tokenizer.json's.
func (t *Tokenizer) parseConfig(text []byte, tokenizerJSON string) error {
	var c configFile
	if err := json.Unmarshal(text, &c); err != nil {
		return err
	}
	if c.SplitSpecialTokens {
		return errors.New(`"split_special_tokens" is true: splitting special-token text is not implemented`)
	}
	keys := make([]string, 0, len(c.AddedTokensDecoder))
	for k := range c.AddedTokensDecoder {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want := c.AddedTokensDecoder[k]
		id, ok := t.ids[want.Content]
		if !ok || fmt.Sprint(id) != k || !t.isAdded[id] || t.special[id] != want.Special {
			return fmt.Errorf(`"added_tokens_decoder" %s %q (special %v) is not an added token of %s with that id and flag`, k, want.Content, want.Special, tokenizerJSON)
		}
	}
	tmpl, err := chatTemplate(c.ChatTemplate)
	if err != nil {
		return err
	}
	t.template = tmpl
	if len(c.PadToken) > 0 && string(c.PadToken) != "null" {
		var pad string
		if err := json.Unmarshal(c.PadToken, &pad); err != nil {
			var obj struct{ Content string }
			if err := json.Unmarshal(c.PadToken, &obj); err != nil || obj.Content == "" {
				return fmt.Errorf(`"pad_token" %s is neither a string nor {"content": ...}`, describe(c.PadToken))
			}
			pad = obj.Content
		}
		id, ok := t.ids[pad]
		if !ok {
			return fmt.Errorf(`"pad_token" %q is not a token of %s`, pad, tokenizerJSON)
		}
		t.padID = int(id)
	}
	return nil
}

// chatTemplate reads "chat_template": a string, or a list of named
// templates of which "default" is the one apply_chat_template uses.
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf(`"chat_template" is neither a string nor a list of {"name", "template"}: %v`, err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf(`"chat_template" lists %d templates and none is named "default"`, len(named))
}

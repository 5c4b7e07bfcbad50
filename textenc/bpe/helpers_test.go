package bpe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec is a tokenizer.json as generic JSON, for tests to build and break.
type spec map[string]any

// byteSymbols returns the 256 symbols of the byte alphabet, in byte order.
func byteSymbols() []string {
	syms := make([]string, 256)
	for b := range syms {
		syms[b] = string(byteRune(byte(b)))
	}
	return syms
}

// addedJSON is one "added_tokens" entry.
func addedJSON(id int, content string, special bool) map[string]any {
	return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
		"rstrip": false, "normalized": false, "special": special}
}

// smallSpec is a valid tokenizer: the byte alphabet (ids 0–255), a few
// merges and three added tokens (two special).
func smallSpec() spec {
	vocab := map[string]any{}
	for id, sym := range byteSymbols() {
		vocab[sym] = id
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"a", "a"}, {"aa", "aa"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"c", "a"}, {"ca", "t"}, {"Ġ", "cat"}}
	var list []any
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
		list = append(list, []any{m[0], m[1]})
	}
	n := len(vocab)
	return spec{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{
			addedJSON(n, "<|endoftext|>", true),
			addedJSON(n+1, "<|im_start|>", true),
			addedJSON(n+2, "<think>", false),
		},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": SplitPattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": list},
	}
}

func (s spec) model() map[string]any { return s["model"].(map[string]any) }

// write saves the spec as dir/name and returns the path.
func (s spec) write(tb testing.TB, dir, name string) string {
	tb.Helper()
	text, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, text, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// writeFile writes text to dir/name and returns the path.
func writeFile(tb testing.TB, dir, name, text string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// loadSpec writes s (and config, unless "") to a temporary folder and
// loads it.
func loadSpec(tb testing.TB, s spec, config string) *Tokenizer {
	tb.Helper()
	dir := tb.TempDir()
	s.write(tb, dir, "tokenizer.json")
	if config != "" {
		writeFile(tb, dir, "tokenizer_config.json", config)
	}
	t, err := Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// readJSON decodes a fixture file.
func readJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(text, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// fixtureAdded reads a qwen3-tokenizer case's added tokens (content → id)
// and which are special from its config.json.
func fixtureAdded(tb testing.TB, dir string) (ids map[string]int, special map[string]bool) {
	tb.Helper()
	var cfg struct {
		AddedTokens   map[string]int `json:"added_tokens"`
		SpecialTokens []string       `json:"special_tokens"`
	}
	readJSON(tb, filepath.Join(dir, "config.json"), &cfg)
	if len(cfg.AddedTokens) == 0 {
		tb.Fatalf("%s/config.json lists no added_tokens", dir)
	}
	special = map[string]bool{}
	for _, s := range cfg.SpecialTokens {
		special[s] = true
	}
	return cfg.AddedTokens, special
}

// byteTokenizer is a tokenizer with the fixture's added tokens at their
// ids, the byte alphabet below them and no merges: its pieces and chat
// strings are the real tokenizer's, its ids are bytes. It lets the tests
// that do not need the 11 MB vocabulary run without it.
func byteTokenizer(tb testing.TB, dir string) *Tokenizer {
	tb.Helper()
	added, special := fixtureAdded(tb, dir)
	first := -1
	for _, id := range added {
		if first < 0 || id < first {
			first = id
		}
	}
	// Written by hand: json.Marshal would sort 150,000 keys.
	var vocab strings.Builder
	vocab.WriteString("{")
	for id, sym := range byteSymbols() {
		text, _ := json.Marshal(sym)
		fmt.Fprintf(&vocab, "%s:%d,", text, id)
	}
	for id := 256; id < first; id++ {
		fmt.Fprintf(&vocab, `"filler%d":%d,`, id, id)
	}
	vocabJSON := json.RawMessage(strings.TrimSuffix(vocab.String(), ",") + "}")
	var list []any
	for content, id := range added {
		list = append(list, addedJSON(id, content, special[content]))
	}
	s := smallSpec()
	s["added_tokens"] = list
	s.model()["vocab"] = vocabJSON
	s.model()["merges"] = []any{}
	tmp := tb.TempDir()
	path := s.write(tb, tmp, "tokenizer.json")
	t, err := LoadFiles(path, filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

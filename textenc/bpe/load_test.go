package bpe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSmallTokenizer checks BPE, decoding and the tables on a hand-made
// vocabulary whose merges are known.
func TestSmallTokenizer(t *testing.T) {
	tk := loadSpec(t, smallSpec(), "")
	id := func(tok string) int {
		t.Helper()
		id, ok := tk.ID(tok)
		if !ok {
			t.Fatalf("no token %q", tok)
		}
		return id
	}
	tests := []struct {
		text string
		want []string
	}{
		{"the cat", []string{"t", "he", "Ġcat"}},
		{" the", []string{"Ġthe"}},
		{"aaaaa", []string{"aaaa", "a"}}, // leftmost merges first
		{"aaa", []string{"aa", "a"}},
		{"    x", []string{"ĠĠ", "Ġ", "Ġ", "x"}},
		{"<|im_start|>cat<think>", []string{"<|im_start|>", "cat", "<think>"}},
		{"é", []string{"Ã", "©"}},
	}
	for _, tc := range tests {
		var want []int
		for _, tok := range tc.want {
			want = append(want, id(tok))
		}
		got, err := tk.Encode(tc.text)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Encode(%+q) = %v, %v; want %v (%q)", tc.text, got, err, want, tc.want)
		}
		text, err := tk.Decode(got, false)
		if err != nil || text != tc.text {
			t.Errorf("Decode(Encode(%+q)) = %+q, %v", tc.text, text, err)
		}
	}
	ids, _ := tk.Encode("<|endoftext|>a<think>")
	if text, _ := tk.Decode(ids, true); text != "a<think>" {
		t.Errorf("Decode skipping specials = %q, want %q", text, "a<think>")
	}
	if !tk.IsSpecial(id("<|im_start|>")) || tk.IsSpecial(id("<think>")) || tk.IsSpecial(id("a")) || tk.IsSpecial(-1) {
		t.Error("IsSpecial is wrong")
	}
	if _, ok := tk.Token(tk.Len()); ok {
		t.Error("Token(Len()) exists")
	}
	if _, err := tk.Decode([]int{0, tk.Len()}, false); err == nil || !strings.Contains(err.Error(), "ids[1]") {
		t.Errorf("Decode of an id past the vocabulary: %v, want an error naming ids[1]", err)
	}
	if _, err := tk.Encode("ok\xffno"); err == nil || !strings.Contains(err.Error(), "offset 2") {
		t.Errorf("Encode of invalid UTF-8: %v, want an error naming offset 2", err)
	}
}

// TestDecodeAddedTokens checks the ByteLevel decoder on added tokens: one
// made of byte-alphabet characters decodes as bytes, any other as its text.
func TestDecodeAddedTokens(t *testing.T) {
	s := smallSpec()
	n := len(s.model()["vocab"].(map[string]any)) + len(s["added_tokens"].([]any))
	s["added_tokens"] = append(s["added_tokens"].([]any), addedJSON(n, "Ġhi", false), addedJSON(n+1, "ü x", false))
	tk := loadSpec(t, s, "")
	for _, tc := range []struct{ token, want string }{{"Ġhi", " hi"}, {"ü x", "ü x"}} {
		id, _ := tk.ID(tc.token)
		if got, err := tk.Decode([]int{id}, false); err != nil || got != tc.want {
			t.Errorf("Decode(%q) = %q, %v; want %q", tc.token, got, err, tc.want)
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("héllo"), "héllo"},
		{[]byte{0xF0, 0xA0, 0x80}, "\uFFFD"},
		{[]byte{0xFF, 0xFE}, "\uFFFD\uFFFD"},
		{[]byte{0xE0, 0x80}, "\uFFFD\uFFFD"},
		{[]byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{[]byte{'a', 0xC3}, "a\uFFFD"},
		{[]byte{0xF4, 0x90}, "\uFFFD\uFFFD"},
		{[]byte{0xF0, 0x90, 0x80, 'A'}, "\uFFFDA"},
		{[]byte{0xC0, 0xAF}, "\uFFFD\uFFFD"},
		{[]byte{0xE2, 0x82}, "\uFFFD"},
	}
	for _, tc := range tests {
		if got := lossyUTF8(tc.in); got != tc.want {
			t.Errorf("lossyUTF8(% X) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestBadTokenizer breaks a valid tokenizer.json one way at a time; each
// must fail to load with an error naming the file and the entry.
func TestBadTokenizer(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(s spec)
		want   string
	}{
		{"not BPE", func(s spec) { s.model()["type"] = "WordPiece" }, `"model.type" is "WordPiece"`},
		{"no model", func(s spec) { delete(s, "model") }, `"model" is missing`},
		{"no merges", func(s spec) { delete(s.model(), "merges") }, `"model.merges" is missing`},
		{"no vocab", func(s spec) { delete(s.model(), "vocab") }, `"model.vocab" is missing`},
		{"merge of an unknown symbol", func(s spec) { s.model()["merges"] = []any{[]any{"Ġ", "zz"}} }, `"model.merges"[0] ["Ġ", "zz"]: "zz" is not in "model.vocab"`},
		{"merge into an unknown symbol", func(s spec) { s.model()["merges"] = []any{[]any{"a", "b"}} }, `"model.merges"[0] ["a", "b"]: "ab" is not in "model.vocab"`},
		{"merge of an added token", func(s spec) { s.model()["merges"] = []any{[]any{"<think>", "a"}} }, `"<think>" is not in "model.vocab"`},
		{"merge of three", func(s spec) { s.model()["merges"] = []any{[]any{"a", "a", "a"}} }, `"model.merges"[0] is not a pair`},
		{"merge string of three", func(s spec) { s.model()["merges"] = []any{"a a a"} }, `"model.merges"[0]: "a a a" is not two symbols`},
		{"merge not a string", func(s spec) { s.model()["merges"] = []any{3} }, `"model.merges"[0] is not a pair`},
		{"merge twice", func(s spec) { s.model()["merges"] = []any{"a a", []any{"a", "a"}} }, `"model.merges"[1] ["a", "a"] repeats merge 0`},
		{"vocabulary hole", func(s spec) { delete(s.model()["vocab"].(map[string]any), "Ġcat") }, `no token has id 266 but "added_tokens"[2] "<think>" has id 269`},
		{"id out of range", func(s spec) { s.model()["vocab"].(map[string]any)["Ġcat"] = 100000 }, `no token has id 266 but "model.vocab" "Ġcat" has id 100000`},
		{"negative id", func(s spec) { s.model()["vocab"].(map[string]any)["Ġcat"] = -1 }, `"model.vocab" "Ġcat": the id -1 is negative`},
		{"shared id", func(s spec) { v := s.model()["vocab"].(map[string]any); v["zz"] = v["a"] }, `"model.vocab" "zz": id 97 is also "a"`},
		{"fractional id", func(s spec) { s.model()["vocab"].(map[string]any)["a"] = 1.5 }, `"model.vocab" "a": the id 1.5 is not an integer`},
		{"string id", func(s spec) { s.model()["vocab"].(map[string]any)["a"] = "7" }, `"model.vocab" "a": the id "7" is not an integer`},
		{"byte symbol missing", func(s spec) {
			v := s.model()["vocab"].(map[string]any)
			v["x0"] = v["Ā"]
			delete(v, "Ā")
			s.model()["merges"] = []any{}
		}, `"model.vocab" lacks the byte-level symbol "Ā" of byte 0x00`},
		{"NFKC", func(s spec) { s["normalizer"] = map[string]any{"type": "NFKC"} }, `"normalizer" is {"type":"NFKC"}, want {"type": "NFC"}`},
		{"no normalizer", func(s spec) { s["normalizer"] = nil }, `"normalizer" is missing`},
		{"other split regex", func(s spec) { split(s)["pattern"] = map[string]any{"Regex": `\s+`} }, `Split regex "\\s+" is not Qwen's`},
		{"string split pattern", func(s spec) { split(s)["pattern"] = map[string]any{"String": " "} }, `"pre_tokenizer": Split pattern {"String":" "}`},
		{"split behavior", func(s spec) { split(s)["behavior"] = "Removed" }, `Split behavior "Removed"`},
		{"prefix space", func(s spec) { byteLevel(s)["add_prefix_space"] = true }, `add_prefix_space true`},
		{"no ByteLevel", func(s spec) {
			pre := s["pre_tokenizer"].(map[string]any)
			pre["pretokenizers"] = pre["pretokenizers"].([]any)[:1]
		}, `want a Sequence of Split and ByteLevel`},
		{"decoder", func(s spec) { s["decoder"] = map[string]any{"type": "WordPiece"} }, `"decoder" is {"type":"WordPiece"}, want ByteLevel`},
		{"post-processor adds tokens", func(s spec) { s["post_processor"] = map[string]any{"type": "TemplateProcessing"} }, `"post_processor" is {"type":"TemplateProcessing"}`},
		{"dropout", func(s spec) { s.model()["dropout"] = 0.1 }, `"model.dropout" is 0.1`},
		{"unknown token", func(s spec) { s.model()["unk_token"] = "a" }, `"model.unk_token" is "a"`},
		{"byte fallback", func(s spec) { s.model()["byte_fallback"] = true }, `"model.byte_fallback" is true`},
		{"ignore merges", func(s spec) { s.model()["ignore_merges"] = true }, `"model.ignore_merges" is true`},
		{"suffix", func(s spec) { s.model()["end_of_word_suffix"] = "</w>" }, `"model.end_of_word_suffix" is "</w>"`},
		{"lstrip", func(s spec) { added(s, 0)["lstrip"] = true }, `"added_tokens"[0] "<|endoftext|>": single_word, lstrip and rstrip are not implemented`},
		{"empty added token", func(s spec) { added(s, 1)["content"] = "" }, `"added_tokens"[1] (id 268): the content is empty`},
		{"added token twice", func(s spec) { added(s, 1)["content"] = "<|endoftext|>" }, `"added_tokens"[1] "<|endoftext|>" repeats "added_tokens"[0]`},
		{"added id taken", func(s spec) { added(s, 2)["id"] = 36 }, `"added_tokens"[2] "<think>": id 36 is also "$"`},
		{"added id off the end", func(s spec) { added(s, 2)["id"] = 400 }, `no token has id 269 but "added_tokens"[2] "<think>" has id 400`},
		{"added token in vocab elsewhere", func(s spec) { added(s, 2)["content"] = "a" }, `"added_tokens"[2] "a" has id 269 but "model.vocab" gives it 97`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec()
			tc.break_(s)
			path := s.write(t, t.TempDir(), "tokenizer.json")
			_, err := LoadFiles(path, "")
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one naming %s and saying %s", err, path, tc.want)
			}
		})
	}
}

func split(s spec) map[string]any {
	return s["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
}

func byteLevel(s spec) map[string]any {
	return s["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[1].(map[string]any)
}

func added(s spec, i int) map[string]any { return s["added_tokens"].([]any)[i].(map[string]any) }

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := smallSpec().write(t, dir, "tokenizer.json")
	notJSON := writeFile(t, dir, "broken.json", `{"model": `)
	tests := []struct {
		name, tokenizer, config, want string
	}{
		{"missing tokenizer.json", filepath.Join(dir, "none.json"), "", "none.json"},
		{"tokenizer.json not JSON", notJSON, "", notJSON},
		{"config not JSON", good, notJSON, notJSON},
		{"missing config", good, filepath.Join(dir, "none.json"), "none.json"},
		{"split special tokens", good, writeFile(t, dir, "c1.json", `{"split_special_tokens": true}`), `"split_special_tokens" is true`},
		{"unknown pad token", good, writeFile(t, dir, "c2.json", `{"pad_token": "<pad>"}`), `"pad_token" "<pad>" is not a token of ` + good},
		{"pad token object", good, writeFile(t, dir, "c3.json", `{"pad_token": {"x": 1}}`), `"pad_token" {"x": 1} is neither`},
		{"added tokens disagree", good, writeFile(t, dir, "c4.json", `{"added_tokens_decoder": {"267": {"content": "<|im_start|>", "special": true}}}`), `"added_tokens_decoder" 267 "<|im_start|>" (special true) is not an added token`},
		{"special flag disagrees", good, writeFile(t, dir, "c5.json", `{"added_tokens_decoder": {"269": {"content": "<think>", "special": true}}}`), `"added_tokens_decoder" 269 "<think>"`},
		{"no default template", good, writeFile(t, dir, "c6.json", `{"chat_template": [{"name": "tool_use", "template": "x"}]}`), `none is named "default"`},
		{"template not text", good, writeFile(t, dir, "c7.json", `{"chat_template": 3}`), `"chat_template" is neither a string nor a list`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFiles(tc.tokenizer, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %s", err, tc.want)
			}
		})
	}
}

// qwen3Config returns the fixture's tokenizer_config.json with its added
// tokens taken out (the small tokenizer has other ids).
func qwen3Config(t *testing.T) string {
	t.Helper()
	var cfg map[string]any
	readJSON(t, filepath.Join("..", "..", "testdata", "fixtures", fixtureKind, "tokenizer_config.json"), &cfg)
	delete(cfg, "added_tokens_decoder")
	cfg["pad_token"] = "<|endoftext|>"
	s := spec(cfg)
	return readBack(t, s)
}

func readBack(t *testing.T, s spec) string {
	t.Helper()
	path := s.write(t, t.TempDir(), "x.json")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func TestChatTemplate(t *testing.T) {
	qwen := qwen3Config(t)
	tk := loadSpec(t, smallSpec(), qwen)
	got, err := tk.ChatPrompt("a cat")
	if want := "<|im_start|>user\na cat<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
		t.Errorf("ChatPrompt = %q, %v; want %q", got, err, want)
	}
	tests := []struct {
		name, config, jinja, want string
	}{
		{"no config", "", "", "no tokenizer_config.json was loaded"},
		{"no template", `{"pad_token": null}`, "", `tokenizer_config.json: there is no "chat_template"`},
		{"other template", `{"chat_template": "{{ messages[0].content }}"}`, "", "is not the Qwen3 template"},
		{"edited template", strings.Replace(qwen, `enable_thinking is false`, `enable_thinking is true`, 1), "", "is not the Qwen3 template"},
		{"other template in chat_template.jinja", `{}`, "{{ messages }}", "chat_template.jinja: the chat template (sha256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			smallSpec().write(t, dir, "tokenizer.json")
			if tc.config != "" {
				writeFile(t, dir, "tokenizer_config.json", tc.config)
			}
			if tc.jinja != "" {
				writeFile(t, dir, "chat_template.jinja", tc.jinja)
			}
			tk, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tk.ChatPrompt("a cat"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ChatPrompt error %v, want one saying %s", err, tc.want)
			}
			if _, _, err := tk.EncodePrompt("a cat", 512); err == nil {
				t.Error("EncodePrompt rendered a prompt with a template it does not know")
			}
		})
	}
	t.Run("template in chat_template.jinja", func(t *testing.T) {
		dir := t.TempDir()
		smallSpec().write(t, dir, "tokenizer.json")
		var cfg map[string]any
		readJSON(t, filepath.Join("..", "..", "testdata", "fixtures", fixtureKind, "tokenizer_config.json"), &cfg)
		writeFile(t, dir, "chat_template.jinja", cfg["chat_template"].(string))
		tk, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.ChatPrompt("a cat"); err != nil {
			t.Error(err)
		}
	})
}

func TestEncodePrompt(t *testing.T) {
	tk := loadSpec(t, smallSpec(), qwen3Config(t))
	full, warning, err := tk.EncodePrompt("the cat the cat", 1000)
	if err != nil || warning != "" {
		t.Fatalf("EncodePrompt: %v, warning %q", err, warning)
	}
	ids, warning, err := tk.EncodePrompt("the cat the cat", 6)
	if err != nil || !slices.Equal(ids, full[:6]) {
		t.Errorf("truncated EncodePrompt = %v, %v; want %v", ids, err, full[:6])
	}
	dropped, _ := tk.Decode(full[6:], false)
	for _, want := range []string{`prompt "the cat the cat"`, fmt.Sprintf("is %d tokens", len(full)), "the 6 the text encoder reads", fmt.Sprintf("dropping %q", dropped)} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q does not say %s", warning, want)
		}
	}
	if _, warning, _ := tk.EncodePrompt(strings.Repeat("long ", 100), 10); !strings.Contains(warning, `prompt "long long`) || !strings.Contains(warning, `…`) {
		t.Errorf("warning for a long prompt: %q, want its start, shortened", warning)
	}
	empty, _, err := tk.EncodePrompt("", 512)
	if text, _ := tk.Decode(empty, false); err != nil || text != "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("empty prompt: %q, %v", text, err)
	}
	if _, _, err := tk.EncodePrompt("x", 0); err == nil || !strings.Contains(err.Error(), "max length 0") {
		t.Errorf("max length 0: %v", err)
	}
	if _, _, err := tk.EncodePrompt("bad \xff prompt", 512); err == nil || !strings.Contains(err.Error(), `prompt "bad \xff prompt"`) {
		t.Errorf("invalid UTF-8 prompt: %v, want an error naming it", err)
	}
	pad, _ := tk.ID("<|endoftext|>")
	row, mask, err := tk.Pad(ids[:3], 5)
	if err != nil || !slices.Equal(row, []int{ids[0], ids[1], ids[2], pad, pad}) || !slices.Equal(mask, []int{1, 1, 1, 0, 0}) {
		t.Errorf("Pad = %v, %v, %v", row, mask, err)
	}
	if _, _, err := tk.Pad(ids, 3); err == nil {
		t.Error("Pad accepted more ids than the max length")
	}
	if _, _, err := loadSpec(t, smallSpec(), "").Pad(ids, 10); err == nil || !strings.Contains(err.Error(), "no pad_token") {
		t.Errorf("Pad without a pad token: %v", err)
	}
}

package bpe

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestSplit pins each alternative of the split pattern and the order in
// which they are tried.
func TestSplit(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"words", "Hello world", []string{"Hello", " world"}},
		{"contractions", "you'll they're I'M we've it's X'D", []string{"you", "'ll", " they", "'re", " I", "'M", " we", "'ve", " it", "'s", " X", "'D"}},
		{"mixed-case contraction", "YOU'Ll", []string{"YOU", "'Ll"}},
		{"contraction wins over letters", "'sun", []string{"'s", "un"}},
		{"long s folds to s", "x'ſa", []string{"x", "'ſ", "a"}},
		{"no contraction with U+2019", "they’re", []string{"they", "’re"}},
		{"apostrophe prefix", "l'amour", []string{"l", "'amour"}},
		{"'l is no contraction", "'la", []string{"'la"}},
		{"symbol prefix", "(x", []string{"(x"}},
		{"tab prefix", "a\tseparated", []string{"a", "\tseparated"}},
		{"digits one by one", "1920s", []string{"1", "9", "2", "0", "s"}},
		{"other numbers", "²½٣３Ⅷ", []string{"²", "½", "٣", "３", "Ⅷ"}},
		{"space before a digit", "is 3", []string{"is", " ", "3"}},
		{"punctuation run", "!!!???...,,,;;;", []string{"!!!???...,,,;;;"}},
		{"space joins symbols", "a (b)", []string{"a", " (", "b", ")"}},
		{"symbols take newlines", "f():\n\treturn", []string{"f", "():\n", "\treturn"}},
		{"tab before a symbol", "\t(", []string{"\t", "("}},
		{"whitespace to the last newline", "hello   \n  world", []string{"hello", "   \n", " ", " world"}},
		{"CRLF", "a\r\n\r\nb", []string{"a", "\r\n\r\n", "b"}},
		{"run before a word", "spaces    between", []string{"spaces", "   ", " between"}},
		{"trailing run", "end   ", []string{"end", "   "}},
		{"leading run", "  x", []string{" ", " x"}},
		{"only spaces", "    ", []string{"    "}},
		{"NBSP is whitespace", "a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
		{"NEL is whitespace", "a\u0085\u0085 1", []string{"a", "\u0085\u0085", " ", "1"}},
		{"ZWSP is not whitespace", "a\u200b\u200b1", []string{"a", "\u200b\u200b", "1"}},
		{"U+001C is not whitespace", "\u001c \u001c", []string{"\u001c", " \u001c"}},
		{"a mark is no letter", "x\u0316y", []string{"x", "\u0316y"}},
		{"emoji", "🌃 city", []string{"🌃", " city"}},
		{"CJK", "一只猫", []string{"一只猫"}},
		{"single character", "a", []string{"a"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			splitPieces(tc.text, func(p string) { got = append(got, p) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("split(%+q) = %+q, want %+q", tc.text, got, tc.want)
			}
		})
	}
}

// TestSegments checks that added tokens are matched leftmost-longest on
// the raw text and that NFC runs on what lies between them.
func TestSegments(t *testing.T) {
	s := smallSpec()
	added := s["added_tokens"].([]any)
	n := len(s.model()["vocab"].(map[string]any))
	s["added_tokens"] = append(added, addedJSON(n+3, "<|im", false))
	tk := loadSpec(t, s, "")
	tests := []struct {
		text string
		want []string
	}{
		{"<|im_start|>user", []string{"<|im_start|>", "user"}},
		{"a<|im_start|<|im_start|>", []string{"a", "<|im", "_start", "|", "<|im_start|>"}},
		{"x<think><think>y", []string{"x", "<think>", "<think>", "y"}},
		{"<THINK>", []string{"<THINK", ">"}},
		{"e\u0301<think>\u0301", []string{"é", "<think>", "\u0301"}},
	}
	for _, tc := range tests {
		got, err := tk.Pieces(tc.text)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Pieces(%+q) = %+q, %v; want %+q", tc.text, got, err, tc.want)
		}
	}
}

// TestPiecesCover checks that the pieces of many texts are non-empty and
// put back together give the NFC text.
func TestPiecesCover(t *testing.T) {
	tk := loadSpec(t, smallSpec(), "")
	alphabet := []string{"a", "Z", "'", "s", "ſ", " ", "  ", "\t", "\n", "\r", "1", "½", ".", "(", "\u00a0", "\u0085", "\u2028", "\u3000", "\u200b", "\u0301", "\u0316", "é", "一", "😀", "\u200d", "’"}
	var text strings.Builder
	for i := range 20000 {
		text.Reset()
		for k := i; k > 0; k /= len(alphabet) {
			text.WriteString(alphabet[k%len(alphabet)])
		}
		s := text.String()
		pieces, err := tk.Pieces(s)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pieces, "") {
			t.Fatalf("Pieces(%+q) = %+q has an empty piece", s, pieces)
		}
		if got := strings.Join(pieces, ""); got != norm.NFC.String(s) {
			t.Fatalf("Pieces(%+q) = %+q joins to %+q, not the NFC text", s, pieces, got)
		}
	}
}

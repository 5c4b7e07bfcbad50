package bpe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// fuzzTokenizer is the fixture's real tokenizer when tokenizer.json is
// there, else the small hand-made one.
func fuzzTokenizer(f *testing.F) (*Tokenizer, []encodeCase) {
	root, err := fixtures.Root()
	if err != nil {
		f.Fatal(err)
	}
	cases, err := fixtures.Discover(root, fixtureKind)
	if err != nil {
		f.Fatal(err)
	}
	var texts []encodeCase
	for _, c := range cases {
		var cs []encodeCase
		readJSON(f, filepath.Join(c.Dir, "cases.json"), &cs)
		texts = append(texts, cs...)
	}
	for _, c := range cases {
		if _, err := os.Stat(filepath.Join(c.Dir, "tokenizer.json")); err == nil {
			tk, err := Load(c.Dir)
			if err != nil {
				f.Fatal(err)
			}
			return tk, texts
		}
	}
	return loadSpec(f, smallSpec(), ""), texts
}

// FuzzEncode checks that Encode never panics, refuses invalid UTF-8, and
// that decoding gives back the NFC text (the pieces joined, where the
// text holds added-token strings, whose neighbours are normalised apart).
func FuzzEncode(f *testing.F) {
	tk, cases := fuzzTokenizer(f)
	var added []string
	for id, tok := range tk.tokens {
		if tk.isAdded[id] {
			added = append(added, tok)
		}
	}
	for _, c := range cases {
		f.Add(c.Text)
	}
	for _, s := range []string{"", "a\xffb", "\xed\xa0\x80", "x'ſa", "o" + strings.Repeat("\u0301", 40), "   \n\t \r\n", "<|im_start|>user\nhi<|im_end|>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := tk.Encode(s)
		pieces, perr := tk.Pieces(s)
		if !utf8.ValidString(s) {
			if err == nil || perr == nil {
				t.Fatalf("invalid UTF-8 %+q was accepted", s)
			}
			return
		}
		if err != nil || perr != nil {
			t.Fatalf("%+q: %v, %v", s, err, perr)
		}
		if slices.Contains(pieces, "") {
			t.Fatalf("Pieces(%+q) has an empty piece: %+q", s, pieces)
		}
		text, err := tk.Decode(ids, false)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join(pieces, "")
		if text != want {
			t.Fatalf("Decode(Encode(%+q)) = %+q, want the pieces joined, %+q", s, text, want)
		}
		if !slices.ContainsFunc(added, func(tok string) bool { return strings.Contains(s, tok) }) && want != nfc(s) {
			t.Fatalf("the pieces of %+q join to %+q, not its NFC %+q", s, want, nfc(s))
		}
		if again := nfc(want); again != want {
			t.Fatalf("NFC of %+q is not stable: %+q, then %+q", s, want, again)
		}
	})
}

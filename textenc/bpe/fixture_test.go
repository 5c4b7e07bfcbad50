package bpe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

const fixtureKind = "qwen3-tokenizer"

type encodeCase struct {
	Text   string   `json:"text"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
	Pieces []string `json:"pieces"`
}

type chatFile struct {
	MaxLength      int        `json:"max_length"`
	Padding        string     `json:"padding"`
	PaddingSide    string     `json:"padding_side"`
	Truncation     bool       `json:"truncation"`
	TruncationSide string     `json:"truncation_side"`
	PadToken       string     `json:"pad_token"`
	PadTokenID     int        `json:"pad_token_id"`
	Prompts        []chatCase `json:"prompts"`
}

type chatCase struct {
	Prompt    string `json:"prompt"`
	Rendered  string `json:"rendered"`
	IDs       []int  `json:"ids"`
	NTokens   int    `json:"n_tokens"`
	Truncated bool   `json:"truncated_to_max_length"`
}

type decodeCase struct {
	IDs         []int  `json:"ids"`
	SkipSpecial bool   `json:"skip_special_tokens"`
	Text        string `json:"text"`
	Note        string `json:"note"`
}

// realTokenizer loads the case's tokenizer.json, which is not kept in
// testdata (11 MB): without it the test is skipped, saying what to set.
func realTokenizer(t *testing.T, c fixtures.Case) *Tokenizer {
	t.Helper()
	path := filepath.Join(c.Dir, "tokenizer.json")
	text, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s has no tokenizer.json (11 MB, not kept in testdata): set %s=../shared/fixtures (the folder holding %s/) to run this test", c.Dir, fixtures.EnvVar, c.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want, ok := c.Config["tokenizer_json_sha256"].(string); ok {
		sum := sha256.Sum256(text)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("%s: sha256 %s, config.json says %s", path, got, want)
		}
	}
	tk, err := Load(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Int("bpe_vocab_size"); ok {
		added, _ := fixtureAdded(t, c.Dir)
		if tk.Len() != n+len(added) {
			t.Errorf("Len() = %d, want bpe_vocab_size %d + %d added tokens", tk.Len(), n, len(added))
		}
	}
	return tk
}

// field names one field of one entry of a fixture file in messages, the
// way the mutation checks look for it.
func field(file string, i int, name string) string { return fmt.Sprintf("%s[%d] %q", file, i, name) }

// compareCase checks one cases.json entry; with ids false only the pieces
// (the tokenizer has the real added tokens but not the real vocabulary).
func compareCase(tk *Tokenizer, i int, c encodeCase, ids bool) []error {
	var errs []error
	pieces, err := tk.Pieces(c.Text)
	if err != nil {
		return []error{fmt.Errorf("%s: %v", field("cases.json", i, "pieces"), err)}
	}
	if !slices.Equal(pieces, c.Pieces) {
		errs = append(errs, fmt.Errorf("%s of %+q: got %+q, want %+q", field("cases.json", i, "pieces"), c.Text, pieces, c.Pieces))
	}
	if !ids {
		return errs
	}
	got, err := tk.Encode(c.Text)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %v", field("cases.json", i, "ids"), err))
	}
	if !slices.Equal(got, c.IDs) {
		errs = append(errs, fmt.Errorf("%s of %+q: got %v, want %v", field("cases.json", i, "ids"), c.Text, got, c.IDs))
	}
	var tokens []string
	for _, id := range got {
		tok, _ := tk.Token(id)
		tokens = append(tokens, tok)
	}
	if !slices.Equal(tokens, c.Tokens) {
		errs = append(errs, fmt.Errorf("%s of %+q: got %+q, want %+q", field("cases.json", i, "tokens"), c.Text, tokens, c.Tokens))
	}
	// The decoded ids are the pieces put back together: NFC text with the
	// added tokens in place.
	text, err := tk.Decode(c.IDs, false)
	if want := strings.Join(c.Pieces, ""); err != nil || text != want {
		errs = append(errs, fmt.Errorf("%s: decode(ids) = %+q, %v; want the joined pieces %+q", field("cases.json", i, "ids"), text, err, want))
	}
	return errs
}

// compareChat checks one chat.json prompt; with ids false only the
// rendered string.
func compareChat(tk *Tokenizer, cf chatFile, i int, c chatCase, ids bool) []error {
	var errs []error
	rendered, err := tk.ChatPrompt(c.Prompt)
	if err != nil || rendered != c.Rendered {
		errs = append(errs, fmt.Errorf("%s: ChatPrompt(%+q) = %+q, %v; want %+q", field("chat.json", i, "rendered"), c.Prompt, rendered, err, c.Rendered))
	}
	if !ids {
		return errs
	}
	full, err := tk.Encode(c.Rendered)
	if err != nil || !slices.Equal(full, c.IDs) {
		errs = append(errs, fmt.Errorf("%s: Encode(%+q) = %v, %v; want %v", field("chat.json", i, "ids"), c.Rendered, full, err, c.IDs))
	}
	if len(full) != c.NTokens {
		errs = append(errs, fmt.Errorf("%s: %d tokens, want %d", field("chat.json", i, "n_tokens"), len(full), c.NTokens))
	}
	got, warning, err := tk.EncodePrompt(c.Prompt, cf.MaxLength)
	want := c.IDs[:min(len(c.IDs), cf.MaxLength)]
	if err != nil || !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("%s: EncodePrompt(%+q, %d) = %v, %v; want %v", field("chat.json", i, "ids"), c.Prompt, cf.MaxLength, got, err, want))
	}
	if (warning != "") != c.Truncated {
		errs = append(errs, fmt.Errorf("%s: EncodePrompt(%+q) warning %q, want a warning: %v", field("chat.json", i, "truncated_to_max_length"), c.Prompt, warning, c.Truncated))
	}
	inputIDs, mask, err := tk.Pad(got, cf.MaxLength)
	if err != nil {
		return append(errs, fmt.Errorf("%s: Pad: %v", field("chat.json", i, "ids"), err))
	}
	for k := range cf.MaxLength {
		wantID, wantMask := cf.PadTokenID, 0
		if k < len(c.IDs) {
			wantID, wantMask = c.IDs[k], 1
		}
		if inputIDs[k] != wantID || mask[k] != wantMask {
			errs = append(errs, fmt.Errorf("%s: padded row position %d: id %d mask %d, want %d and %d (pad_token_id %d)", field("chat.json", i, "ids"), k, inputIDs[k], mask[k], wantID, wantMask, cf.PadTokenID))
			break
		}
	}
	return errs
}

func compareDecode(tk *Tokenizer, i int, c decodeCase) []error {
	text, err := tk.Decode(c.IDs, c.SkipSpecial)
	if err != nil || text != c.Text {
		return []error{fmt.Errorf("%s (%s): Decode(%v, %v) = %+q, %v; want %+q", field("decode.json", i, "text"), c.Note, c.IDs, c.SkipSpecial, text, err, c.Text)}
	}
	return nil
}

func readChat(t *testing.T, dir string) chatFile {
	var cf chatFile
	readJSON(t, filepath.Join(dir, "chat.json"), &cf)
	// The pipelines' call; another would need another implementation.
	if cf.MaxLength <= 0 || cf.Padding != "max_length" || cf.PaddingSide != "right" || !cf.Truncation || cf.TruncationSide != "right" {
		t.Fatalf("%s/chat.json: max_length %d padding %q side %q truncation %v side %q: only positive max_length, max_length padding and right truncation and padding are implemented",
			dir, cf.MaxLength, cf.Padding, cf.PaddingSide, cf.Truncation, cf.TruncationSide)
	}
	if len(cf.Prompts) == 0 {
		t.Fatalf("%s/chat.json has no prompts", dir)
	}
	return cf
}

func readCases(t *testing.T, dir string) []encodeCase {
	var cases []encodeCase
	readJSON(t, filepath.Join(dir, "cases.json"), &cases)
	if len(cases) == 0 {
		t.Fatalf("%s/cases.json has no cases", dir)
	}
	return cases
}

func report(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
}

// TestFixturePieces checks the pre-tokenizer and the chat strings on every
// case with a byte-only vocabulary, so it runs without tokenizer.json.
func TestFixturePieces(t *testing.T) {
	fixtures.Run(t, fixtureKind, func(t *testing.T, c fixtures.Case) {
		tk := byteTokenizer(t, c.Dir)
		for i, tc := range readCases(t, c.Dir) {
			report(t, compareCase(tk, i, tc, false))
		}
		cf := readChat(t, c.Dir)
		for i, p := range cf.Prompts {
			report(t, compareChat(tk, cf, i, p, false))
		}
		if id, ok := tk.PadID(); !ok || id != cf.PadTokenID {
			t.Errorf("PadID() = %d, %v; want chat.json pad_token_id %d", id, ok, cf.PadTokenID)
		}
		if tok, _ := tk.Token(cf.PadTokenID); tok != cf.PadToken {
			t.Errorf("Token(pad_token_id %d) = %q, want %q", cf.PadTokenID, tok, cf.PadToken)
		}
	})
}

// TestFixture checks every case of cases.json, chat.json and decode.json
// with the real tokenizer.
func TestFixture(t *testing.T) {
	fixtures.Run(t, fixtureKind, func(t *testing.T, c fixtures.Case) {
		tk := realTokenizer(t, c)
		t.Run("encode", func(t *testing.T) {
			for i, tc := range readCases(t, c.Dir) {
				report(t, compareCase(tk, i, tc, true))
			}
		})
		t.Run("chat", func(t *testing.T) {
			cf := readChat(t, c.Dir)
			for i, p := range cf.Prompts {
				report(t, compareChat(tk, cf, i, p, true))
			}
		})
		t.Run("decode", func(t *testing.T) {
			var cases []decodeCase
			readJSON(t, filepath.Join(c.Dir, "decode.json"), &cases)
			if len(cases) == 0 {
				t.Fatalf("%s/decode.json has no cases", c.Dir)
			}
			for i, dc := range cases {
				report(t, compareDecode(tk, i, dc))
			}
		})
		t.Run("mutations", func(t *testing.T) { checkMutations(t, c, tk) })
	})
}

// checkMutations corrupts one expected value of every fixture entry (an
// id bumped by one, a string extended, a count or flag changed) and
// requires the comparison to reject it, naming the corrupted field. The
// ids given to decode are inputs and are left alone.
func checkMutations(t *testing.T, c fixtures.Case, tk *Tokenizer) {
	n := 0
	check := func(what, name string, errs []error) {
		t.Helper()
		n++
		for _, err := range errs {
			if strings.Contains(err.Error(), name) {
				return
			}
		}
		t.Errorf("%s: the comparison did not reject it (errors: %v)", what, errs)
	}
	for i, tc := range readCases(t, c.Dir) {
		if len(tc.IDs) > 0 {
			m := tc
			m.IDs = slices.Clone(tc.IDs)
			m.IDs[len(m.IDs)-1]++
			check(fmt.Sprintf("cases.json[%d] last id +1", i), field("cases.json", i, "ids"), compareCase(tk, i, m, true))
			m = tc
			m.Tokens = slices.Clone(tc.Tokens)
			m.Tokens[0] += "x"
			check(fmt.Sprintf("cases.json[%d] token 0 changed", i), field("cases.json", i, "tokens"), compareCase(tk, i, m, true))
		}
		m := tc
		m.Pieces = append(slices.Clone(tc.Pieces), "x")
		check(fmt.Sprintf("cases.json[%d] piece added", i), field("cases.json", i, "pieces"), compareCase(tk, i, m, true))
	}
	cf := readChat(t, c.Dir)
	for i, p := range cf.Prompts {
		m := p
		m.Rendered += " "
		check(fmt.Sprintf("chat.json[%d] rendered changed", i), field("chat.json", i, "rendered"), compareChat(tk, cf, i, m, true))
		m = p
		m.IDs = slices.Clone(p.IDs)
		m.IDs[0]++
		check(fmt.Sprintf("chat.json[%d] id 0 +1", i), field("chat.json", i, "ids"), compareChat(tk, cf, i, m, true))
		m = p
		m.NTokens++
		check(fmt.Sprintf("chat.json[%d] n_tokens +1", i), field("chat.json", i, "n_tokens"), compareChat(tk, cf, i, m, true))
		m = p
		m.Truncated = !p.Truncated
		check(fmt.Sprintf("chat.json[%d] truncated flipped", i), field("chat.json", i, "truncated_to_max_length"), compareChat(tk, cf, i, m, true))
		mf := cf
		mf.PadTokenID++
		if len(p.IDs) < cf.MaxLength {
			check(fmt.Sprintf("chat.json pad_token_id +1 (prompt %d)", i), field("chat.json", i, "ids"), compareChat(tk, mf, i, p, true))
		}
	}
	var cases []decodeCase
	readJSON(t, filepath.Join(c.Dir, "decode.json"), &cases)
	for i, dc := range cases {
		m := dc
		m.Text += "x"
		check(fmt.Sprintf("decode.json[%d] text changed", i), field("decode.json", i, "text"), compareDecode(tk, i, m))
	}
	if n == 0 {
		t.Error("nothing to corrupt")
	}
}

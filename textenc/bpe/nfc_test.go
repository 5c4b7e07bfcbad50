package bpe

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestNFCLongRuns checks texts with more than 30 combining marks in a
// row, where x/text's norm inserts U+034F: the expected strings are
// Python's unicodedata.normalize("NFC", …), which, like the tokenizers
// library, follows the definition.
func TestNFCLongRuns(t *testing.T) {
	r := strings.Repeat
	tests := []struct{ in, want string }{
		{"o" + r("\u0301", 35), "ó" + r("\u0301", 34)},
		{"e" + r("\u0323", 20) + r("\u0302", 20), "ệ" + r("\u0323", 19) + r("\u0302", 19)},
		{"a" + r("\u0316", 31) + "\u0300", "à" + r("\u0316", 31)},
		{r("\u0301", 33) + "a\u0301", r("\u0301", 33) + "á"},
		{"\u1100\u1161" + r("\u0301", 32) + "\u11a8", "가" + r("\u0301", 32) + "\u11a8"},
		{"A" + r("\u030a", 31), "Å" + r("\u030a", 30)},
	}
	for _, tc := range tests {
		if got := nfc(tc.in); got != tc.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
		if norm.NFC.String(tc.in) == tc.want {
			t.Errorf("%+q: norm.NFC agrees, so the case does not test the fallback", tc.in)
		}
	}
}

// TestNFCByDefinition checks the fallback against norm where norm is
// exact (no run longer than 30 non-starters).
func TestNFCByDefinition(t *testing.T) {
	alphabet := []string{"a", "e", "A", "\u0301", "\u0323", "\u0302", "\u0308", "\u0316", "\u0345", "\u0327", "\u1100", "\u1161", "\u11a8", "가", "\u0b47", "\u0b3e", "\u212b", "ſ", "ﬁ", "\u0344", "\u0f73", "\u1e9b", " "}
	var sb strings.Builder
	for i := range 50000 {
		sb.Reset()
		for k := i; k > 0; k /= len(alphabet) {
			sb.WriteString(alphabet[k%len(alphabet)])
		}
		s := sb.String()
		if got, want := nfcByDefinition(s), norm.NFC.String(s); got != want {
			t.Fatalf("nfcByDefinition(%+q) = %+q, norm.NFC gives %+q", s, got, want)
		}
	}
}

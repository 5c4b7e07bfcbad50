package bpe

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// benchTokenizer loads the real tokenizer, skipping without it.
func benchTokenizer(b *testing.B) (*Tokenizer, string) {
	root, err := fixtures.Root()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, fixtureKind)
	tk, err := Load(dir)
	if err != nil {
		b.Skipf("%v (set %s=../shared/fixtures)", err, fixtures.EnvVar)
	}
	var cases []encodeCase
	readJSON(b, filepath.Join(dir, "cases.json"), &cases)
	var texts []string
	for _, c := range cases {
		texts = append(texts, c.Text)
	}
	return tk, strings.Join(texts, "\n")
}

func BenchmarkLoad(b *testing.B) {
	root, err := fixtures.Root()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, fixtureKind)
	if _, err := Load(dir); err != nil {
		b.Skipf("%v (set %s=../shared/fixtures)", err, fixtures.EnvVar)
	}
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode encodes all fixture texts with the piece cache warm;
// BenchmarkEncodeCold empties it first, so every piece runs BPE.
func BenchmarkEncode(b *testing.B)     { benchEncode(b, false) }
func BenchmarkEncodeCold(b *testing.B) { benchEncode(b, true) }

func benchEncode(b *testing.B, cold bool) {
	tk, text := benchTokenizer(b)
	ids, err := tk.Encode(text)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if cold {
			tk.mu.Lock()
			clear(tk.cache)
			tk.mu.Unlock()
		}
		if _, err := tk.Encode(text); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

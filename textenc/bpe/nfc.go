package bpe

import (
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nfc returns the NFC form of s as Unicode defines it. x/text's norm
// applies the Stream-Safe Text Format: after 30 non-starters it inserts
// U+034F, which changes the text and its tokens. The tokenizers library
// (and Python, and JavaScript) do not, so when norm inserted one the text
// is normalised again by the definition.
func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	out := norm.NFC.String(s)
	if strings.Count(out, norm.GraphemeJoiner) == strings.Count(s, norm.GraphemeJoiner) {
		return out
	}
	return nfcByDefinition(s)
}

// nfcByDefinition is canonical decomposition, canonical ordering and
// canonical composition (UAX #15), with no limit on runs of non-starters.
// It is slow and only runs on the texts norm would change otherwise.
func nfcByDefinition(s string) string {
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(norm.NFD.String(string(r)))...)
	}
	ccc := func(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }
	for i := 0; i < len(rs); {
		if ccc(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		run := rs[i:j]
		sort.SliceStable(run, func(a, b int) bool { return ccc(run[a]) < ccc(run[b]) })
		i = j
	}
	if len(rs) == 0 {
		return ""
	}
	out := []rune{rs[0]}
	starter := 0
	last := int(ccc(rs[0]))
	if last != 0 {
		starter, last = -1, 256 // no starter yet: nothing composes
	}
	for _, r := range rs[1:] {
		c := int(ccc(r))
		if starter >= 0 && (last < c || last == 0) {
			if p, ok := compose(out[starter], r); ok {
				out[starter] = p
				continue
			}
		}
		if c == 0 {
			starter = len(out)
		}
		last = c
		out = append(out, r)
	}
	return string(out)
}

// compose returns the primary composite of a and b, if there is one. b is
// not blocked from a, so NFC of the pair composes exactly it.
func compose(a, b rune) (rune, bool) {
	s := norm.NFC.String(string([]rune{a, b}))
	if r, size := utf8.DecodeRuneInString(s); size == len(s) {
		return r, true
	}
	return 0, false
}

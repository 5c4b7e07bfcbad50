package bpe

import "unicode"

// splitPieces calls f with each match of SplitPattern in s, in order. The
// pattern matches at every position, so the pieces concatenate to s.
//
// At each position the alternatives are tried in the pattern's order and
// the first that matches wins, as in the backtracking engines (Oniguruma)
// the pattern was written for; each is greedy. \s is Unicode White_Space
// (unicode.IsSpace), \p{L} is L (Lu Ll Lt Lm Lo) and \p{N} is N (Nd Nl No).
func splitPieces(s string, f func(piece string)) {
	rs := make([]rune, 0, len(s))
	off := make([]int, 0, len(s)+1)
	for i, r := range s {
		rs = append(rs, r)
		off = append(off, i)
	}
	off = append(off, len(s))
	for i := 0; i < len(rs); {
		j := matchAt(rs, i)
		f(s[off[i]:off[j]])
		i = j
	}
}

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// matchAt returns the end (exclusive, > i) of the piece that starts at i.
func matchAt(rs []rune, i int) int {
	n, r := len(rs), rs[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if j := contraction(rs, i+1); j > 0 {
			return j
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(r) {
		return letters(rs, i)
	}
	if !isCRLF(r) && !isNumber(r) && i+1 < n && isLetter(rs[i+1]) {
		return letters(rs, i+1)
	}
	// \p{N}
	if isNumber(r) {
		return i + 1
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*': r is a space, tab, symbol, mark, …
	k := i
	if r == ' ' {
		k++
	}
	if k < n && isOther(rs[k]) {
		j := k + 1
		for j < n && isOther(rs[j]) {
			j++
		}
		for j < n && isCRLF(rs[j]) {
			j++
		}
		return j
	}
	// Every character that is not whitespace has matched by now.
	end, lastCRLF := i, -1
	for end < n && isSpace(rs[end]) {
		if isCRLF(rs[end]) {
			lastCRLF = end
		}
		end++
	}
	switch {
	case lastCRLF >= 0: // \s*[\r\n]+
		return lastCRLF + 1
	case end == n: // \s+(?!\S) at the end of the text
		return n
	case end-i >= 2: // \s+(?!\S): the run but its last character
		return end - 1
	}
	return i + 1 // \s+: one whitespace character before a non-space
}

// letters returns the end of the run of letters starting at i.
func letters(rs []rune, i int) int {
	for i < len(rs) && isLetter(rs[i]) {
		i++
	}
	return i
}

// contraction matches s|t|re|ve|m|ll|d case-insensitively at i and
// returns its end, or 0. Case-insensitive is Unicode simple case folding,
// as in Oniguruma, which the Rust tokenizers library runs the pattern
// with: 'ſ' (U+017F) matches s. (tokenizers.js folds ASCII only and splits
// "'ſa" whole; NFC has already turned the Kelvin sign into K.)
func contraction(rs []rune, i int) int {
	for _, suffix := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		j := i
		for _, c := range suffix {
			if j >= len(rs) || !foldEq(rs[j], c) {
				j = -1
				break
			}
			j++
		}
		if j > 0 {
			return j
		}
	}
	return 0
}

// foldEq reports whether r and c are equal under simple case folding.
func foldEq(r, c rune) bool {
	for f := c; ; {
		if f == r {
			return true
		}
		if f = unicode.SimpleFold(f); f == c {
			return false
		}
	}
}

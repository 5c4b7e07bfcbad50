package bpe

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is safe for
// concurrent use.
type Tokenizer struct {
	tokens  []string         // id → token text (byte alphabet for BPE tokens)
	ids     map[string]int32 // token text → id
	isAdded []bool           // id → an added token (matched before splitting)
	special []bool           // id → an added token marked special
	byteID  [256]int32       // byte → id of its one-byte symbol
	merges  map[uint64]merge // (left id, right id) → rank and merged id

	rawAdded  *matcher // added tokens matched on the raw text
	normAdded *matcher // added tokens with "normalized": true, matched after NFC

	bytes   []byte  // concatenated decoded bytes of every id
	byteOff []int32 // id → bytes[byteOff[id]:byteOff[id+1]]

	template     string // the chat template, "" if none
	templateFile string // where it came from, for messages
	padID        int    // -1 without a pad token

	mu    sync.Mutex
	cache map[string][]int32 // piece → ids, bounded by cacheLimit
}

type merge struct {
	rank int32
	id   int32
}

// cacheLimit bounds the per-tokenizer piece cache; pieces longer than
// cachePieceMax bytes are not cached.
const (
	cacheLimit    = 1 << 16
	cachePieceMax = 64
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Len returns the number of ids, 0…Len()−1, added tokens included.
func (t *Tokenizer) Len() int { return len(t.tokens) }

// Token returns the vocabulary text of id (byte-alphabet form for BPE
// tokens, e.g. "Ġcat").
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a vocabulary or added token text.
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.ids[token]
	return int(id), ok
}

// IsSpecial reports whether id is an added token marked special, the ids
// that decoding with skipSpecial drops.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// Encode returns the ids of text: added tokens first, then NFC, the
// pre-tokenizer split and BPE on what lies between them. No BOS or EOS is
// added (Qwen adds none). The text must be valid UTF-8.
func (t *Tokenizer) Encode(text string) ([]int, error) {
	if err := checkUTF8(text); err != nil {
		return nil, err
	}
	var ids []int
	t.segments(text, func(piece string, added int32) {
		if added >= 0 {
			ids = append(ids, int(added))
			return
		}
		for _, id := range t.bpe(piece) {
			ids = append(ids, int(id))
		}
	})
	return ids, nil
}

// Pieces returns the units BPE runs on: the added tokens and the
// pre-tokenizer's pieces of the NFC-normalised text between them.
func (t *Tokenizer) Pieces(text string) ([]string, error) {
	if err := checkUTF8(text); err != nil {
		return nil, err
	}
	var pieces []string
	t.segments(text, func(piece string, _ int32) { pieces = append(pieces, piece) })
	return pieces, nil
}

func checkUTF8(text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	for i := 0; ; {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("bpe: the text is not valid UTF-8 (byte 0x%02X at offset %d)", text[i], i)
		}
		i += size
	}
}

// segments calls f for each added token (with its id) and each
// pre-tokenizer piece (with id −1), in order.
func (t *Tokenizer) segments(text string, f func(piece string, added int32)) {
	t.rawAdded.split(text, func(seg string, id int32) {
		if id >= 0 {
			f(seg, id)
			return
		}
		t.normAdded.split(nfc(seg), func(seg string, id int32) {
			if id >= 0 {
				f(seg, id)
				return
			}
			splitPieces(seg, func(piece string) { f(piece, -1) })
		})
	})
}

// matcher finds added tokens leftmost-longest, case-sensitively.
type matcher struct {
	byFirst map[byte][]string // first byte → tokens, longest first
	ids     map[string]int32
}

func newMatcher(tokens []string, ids map[string]int32) *matcher {
	m := &matcher{byFirst: make(map[byte][]string), ids: ids}
	for _, tok := range tokens {
		m.byFirst[tok[0]] = append(m.byFirst[tok[0]], tok)
	}
	for _, list := range m.byFirst {
		sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	}
	return m
}

// split calls f with the text between matches (id −1, never empty) and
// with each match and its id.
func (m *matcher) split(text string, f func(seg string, id int32)) {
	start := 0
	for i := 0; i < len(text); i++ {
		for _, tok := range m.byFirst[text[i]] {
			if strings.HasPrefix(text[i:], tok) {
				if i > start {
					f(text[start:i], -1)
				}
				f(tok, m.ids[tok])
				start = i + len(tok)
				i = start - 1
				break
			}
		}
	}
	if start < len(text) {
		f(text[start:], -1)
	}
}

// byteRune maps a byte to its character in the GPT-2 byte alphabet: the
// printable bytes stand for themselves, the other 68 become U+0100… in
// byte order.
func byteRune(b byte) rune {
	switch {
	case b <= 0x20:
		return 0x100 + rune(b)
	case b >= 0x7F && b <= 0xA0:
		return 0x100 + 33 + rune(b-0x7F)
	case b == 0xAD:
		return 0x100 + 67
	}
	return rune(b)
}

// charByte inverts byteRune.
func charByte(r rune) (byte, bool) {
	switch {
	case r >= 0x21 && r <= 0x7E, r >= 0xA1 && r <= 0xAC, r >= 0xAE && r <= 0xFF:
		return byte(r), true
	case r >= 0x100 && r <= 0x120:
		return byte(r - 0x100), true
	case r >= 0x121 && r <= 0x142:
		return byte(r - 0x121 + 0x7F), true
	case r == 0x143:
		return 0xAD, true
	}
	return 0, false
}

// bpe returns the ids of one piece, from the cache when it can.
func (t *Tokenizer) bpe(piece string) []int32 {
	if len(piece) == 1 {
		return []int32{t.byteID[piece[0]]}
	}
	if len(piece) <= cachePieceMax {
		t.mu.Lock()
		ids, ok := t.cache[piece]
		t.mu.Unlock()
		if ok {
			return ids
		}
	}
	ids := t.merge(piece)
	if len(piece) <= cachePieceMax {
		t.mu.Lock()
		if len(t.cache) < cacheLimit {
			t.cache[piece] = ids
		}
		t.mu.Unlock()
	}
	return ids
}

// symbol is one node of the merge loop's linked list; a merged-away
// symbol has n == 0.
type symbol struct {
	id         int32
	prev, next int32
	n          int32
}

// candidate is a pending merge of the symbol at pos with its successor.
type candidate struct {
	rank, pos, id int32
}

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// merge runs BPE on the bytes of piece: starting from one symbol per
// byte, it repeatedly joins the adjacent pair of lowest rank, the leftmost
// on ties, until no adjacent pair is a merge.
func (t *Tokenizer) merge(piece string) []int32 {
	syms := make([]symbol, len(piece))
	for i := range syms {
		syms[i] = symbol{id: t.byteID[piece[i]], prev: int32(i) - 1, next: int32(i) + 1, n: 1}
	}
	syms[len(syms)-1].next = -1
	var h heap
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := t.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(candidate{rank: m.rank, pos: int32(i), id: m.id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		left := &syms[c.pos]
		if left.n == 0 || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		// The pair may have changed since c was queued.
		if m, ok := t.merges[pairKey(left.id, right.id)]; !ok || m.id != c.id {
			continue
		}
		left.id, left.n, left.next = c.id, left.n+right.n, right.next
		right.n = 0
		if left.next >= 0 {
			syms[left.next].prev = c.pos
			if m, ok := t.merges[pairKey(left.id, syms[left.next].id)]; ok {
				h.push(candidate{rank: m.rank, pos: c.pos, id: m.id})
			}
		}
		if left.prev >= 0 {
			if m, ok := t.merges[pairKey(syms[left.prev].id, left.id)]; ok {
				h.push(candidate{rank: m.rank, pos: left.prev, id: m.id})
			}
		}
	}
	var ids []int32
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// heap is a binary min-heap of candidates.
type heap []candidate

func (h *heap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *heap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(s) && s[l].less(s[small]) {
			small = l
		}
		if r := l + 1; r < len(s) && s[r].less(s[small]) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// Decode returns the text of ids: each token's bytes, concatenated, with
// one U+FFFD per maximal invalid UTF-8 subsequence. With skipSpecial the
// special added tokens are left out (other added tokens, such as <think>,
// stay). No spaces are cleaned up.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	var buf []byte
	for i, id := range ids {
		if id < 0 || id >= len(t.tokens) {
			return "", fmt.Errorf("bpe: decode: ids[%d] = %d is outside the vocabulary 0…%d", i, id, len(t.tokens)-1)
		}
		if skipSpecial && t.special[id] {
			continue
		}
		buf = append(buf, t.bytes[t.byteOff[id]:t.byteOff[id+1]]...)
	}
	return lossyUTF8(buf), nil
}

// lossyUTF8 converts b to a string, replacing each maximal subpart of an
// ill-formed sequence (Unicode §3.9, the WHATWG decoder) with U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[:size])
			b = b[size:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart returns the length of the ill-formed prefix of b that one
// U+FFFD replaces: a valid lead byte and the continuation bytes that may
// follow it, or one byte.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

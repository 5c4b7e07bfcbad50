package recipes

import (
	"regexp"
	"strconv"
	"strings"
)

// keyLines maps every key of a TOML document to the line it is written
// on. Keys are display keys: segments joined by dots, array elements and
// array-of-tables entries as [i] ("stage[1].rho[2]"). The scanner assumes a
// document the TOML parser has accepted.
type keyLines struct {
	line  map[string]int
	order []string // keys in document order
}

// lineOf returns the line of key, or of its nearest ancestor present in
// the document; 0 when none is.
func (k *keyLines) lineOf(key string) int {
	for key != "" {
		if l, ok := k.line[key]; ok {
			return l
		}
		key = parentKey(key)
	}
	return 0
}

// has reports whether key is written in the document.
func (k *keyLines) has(key string) bool {
	if k == nil {
		return false
	}
	_, ok := k.line[key]
	return ok
}

// linesOfUnindexed returns the lines of every key that equals key once
// its [i] indices are removed ("stage.steps" finds "stage[0].steps" and
// "stage[2].steps"), with those indexed keys.
func (k *keyLines) linesOfUnindexed(key string) (keys []string, lines []int) {
	for _, full := range k.order {
		if stripIndices(full) == key {
			keys = append(keys, full)
			lines = append(lines, k.line[full])
		}
	}
	return keys, lines
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

func stripIndices(key string) string { return indexRE.ReplaceAllString(key, "") }

// parentKey drops the last segment or index of a display key.
func parentKey(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	// The last dot outside quotes.
	inQuote := false
	last := -1
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '"':
			inQuote = !inQuote
		case '.':
			if !inQuote {
				last = i
			}
		}
	}
	if last < 0 {
		return ""
	}
	return key[:last]
}

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// childKey appends a key segment, quoting it when it is not a bare key.
func childKey(parent, seg string) string {
	if !bareKeyRE.MatchString(seg) {
		seg = strconv.Quote(seg)
	}
	if parent == "" {
		return seg
	}
	return parent + "." + seg
}

// indexKey appends an array index.
func indexKey(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// scanLines finds the line of every key, table header, array-of-tables
// entry and array element of a TOML document.
func scanLines(text string) *keyLines {
	s := &scanner{src: text, line: 1, out: &keyLines{line: map[string]int{}}, arrays: map[string]int{}}
	s.document()
	return s.out
}

type scanner struct {
	src    string
	pos    int
	line   int
	out    *keyLines
	arrays map[string]int // array-of-tables key → entries seen
}

func (s *scanner) record(key string, line int) {
	if _, ok := s.out.line[key]; !ok {
		s.out.line[key] = line
		s.out.order = append(s.out.order, key)
	}
}

func (s *scanner) eof() bool { return s.pos >= len(s.src) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.pos]
}

// skipSpace skips blanks, and with newlines also line breaks and comments.
func (s *scanner) skipSpace(newlines bool) {
	for !s.eof() {
		switch c := s.src[s.pos]; {
		case c == ' ' || c == '\t' || c == '\r':
			s.pos++
		case c == '#':
			for !s.eof() && s.src[s.pos] != '\n' {
				s.pos++
			}
		case c == '\n' && newlines:
			s.pos++
			s.line++
		default:
			return
		}
	}
}

func (s *scanner) document() {
	table := ""
	for {
		s.skipSpace(true)
		if s.eof() {
			return
		}
		line := s.line
		if s.peek() == '[' {
			s.pos++
			array := s.peek() == '['
			if array {
				s.pos++
			}
			segs := s.key(']')
			// Resolve the header against the arrays of tables seen so far:
			// [stage.data] after [[stage]] is the last stage's data.
			key := ""
			for i, seg := range segs {
				key = childKey(key, seg)
				if i < len(segs)-1 || !array {
					if n, ok := s.arrays[key]; ok {
						key = indexKey(key, n-1)
					}
				}
			}
			if array {
				s.record(key, line)
				n := s.arrays[key]
				s.arrays[key] = n + 1
				key = indexKey(key, n)
			}
			s.record(key, line)
			table = key
			s.skipTo('\n')
			continue
		}
		start := s.pos
		segs := s.key('=')
		key := table
		for _, seg := range segs {
			key = childKey(key, seg)
			s.record(key, line)
		}
		s.value(key)
		if s.pos == start {
			s.pos++
		}
	}
}

// skipTo moves past the next occurrence of c on this line (or to EOF).
func (s *scanner) skipTo(c byte) {
	for !s.eof() && s.src[s.pos] != c {
		s.pos++
	}
}

// key reads a dotted key up to and including the terminator ('=' or ']';
// a header's ']]' closes on its first ']').
func (s *scanner) key(term byte) []string {
	var segs []string
	for !s.eof() {
		s.skipSpace(false)
		switch c := s.peek(); c {
		case term:
			s.pos++
			if term == ']' && s.peek() == ']' {
				s.pos++
			}
			return segs
		case '.':
			s.pos++
		case '"', '\'':
			segs = append(segs, s.quoted())
		default:
			start := s.pos
			for !s.eof() {
				c := s.src[s.pos]
				if c == '.' || c == term || c == ' ' || c == '\t' {
					break
				}
				s.pos++
			}
			if s.pos == start { // not valid TOML; make progress
				s.pos++
				continue
			}
			segs = append(segs, s.src[start:s.pos])
		}
	}
	return segs
}

// quoted reads a one-line basic or literal string and returns its value.
func (s *scanner) quoted() string {
	q := s.src[s.pos]
	start := s.pos
	s.pos++
	for !s.eof() && s.src[s.pos] != q {
		if q == '"' && s.src[s.pos] == '\\' {
			s.pos++
		}
		s.pos++
	}
	s.pos = min(s.pos+1, len(s.src))
	raw := s.src[start:s.pos]
	if q == '\'' {
		return strings.Trim(raw, "'")
	}
	if v, err := strconv.Unquote(raw); err == nil {
		return v
	}
	return strings.Trim(raw, `"`)
}

// value skips one value, recording the keys of inline tables and the
// elements of arrays under key.
func (s *scanner) value(key string) {
	s.skipSpace(false)
	if s.eof() {
		return
	}
	switch c := s.peek(); {
	case strings.HasPrefix(s.src[s.pos:], `"""`), strings.HasPrefix(s.src[s.pos:], `'''`):
		delim := s.src[s.pos : s.pos+3]
		s.pos += 3
		for !s.eof() && !strings.HasPrefix(s.src[s.pos:], delim) {
			if s.src[s.pos] == '\n' {
				s.line++
			}
			if delim == `"""` && s.src[s.pos] == '\\' {
				s.pos++
				if !s.eof() && s.src[s.pos] == '\n' {
					s.line++
				}
			}
			s.pos = min(s.pos+1, len(s.src))
		}
		s.pos = min(s.pos+3, len(s.src))
		// A closing delimiter may be followed by up to two more quotes.
		for !s.eof() && s.src[s.pos] == delim[0] {
			s.pos++
		}
	case c == '"' || c == '\'':
		s.quoted()
	case c == '[':
		s.pos++
		for i := 0; ; i++ {
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.peek() == ']' {
				s.pos++
				return
			}
			el := indexKey(key, i)
			s.record(el, s.line)
			start := s.pos
			s.value(el)
			s.skipSpace(true)
			if s.peek() == ',' || s.pos == start {
				s.pos++ // a comma, or (in text the parser rejects) no progress
			}
		}
	case c == '{':
		s.pos++
		for {
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.peek() == '}' {
				s.pos++
				return
			}
			if s.peek() == ',' {
				s.pos++
				continue
			}
			line, start := s.line, s.pos
			sub := key
			for _, seg := range s.key('=') {
				sub = childKey(sub, seg)
				s.record(sub, line)
			}
			s.value(sub)
			if s.pos == start {
				s.pos++
			}
		}
	default:
		for !s.eof() {
			c := s.src[s.pos]
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '#' {
				break
			}
			s.pos++
		}
	}
}

package bpe

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The vocabulary and the merges are 300,000 small JSON values; decoding
// them through reflection takes most of a load, so they are scanned by
// hand. encoding/json has checked the whole document's syntax before it
// calls these UnmarshalJSON methods.

// vocabJSON is "model.vocab": token → id.
type vocabJSON map[string]int32

// mergesJSON is "model.merges": each merge as its two symbols.
type mergesJSON [][2]string

// UnmarshalJSON reads the object, refusing repeated tokens and ids that
// are not 32-bit integers.
func (v *vocabJSON) UnmarshalJSON(b []byte) error {
	s := scanner{b: b, name: `"model.vocab"`}
	if s.null() {
		return nil
	}
	m := make(vocabJSON)
	err := s.list('{', '}', func() error {
		tok, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		id, err := s.int()
		if err != nil {
			return fmt.Errorf(`"model.vocab" %q: %w`, tok, err)
		}
		if _, dup := m[tok]; dup {
			return fmt.Errorf(`"model.vocab" %q appears twice`, tok)
		}
		if id < math.MinInt32 || id > math.MaxInt32 {
			return fmt.Errorf(`"model.vocab" %q: the id %d is out of range`, tok, id)
		}
		m[tok] = int32(id)
		return nil
	})
	if err != nil {
		return err
	}
	*v = m
	return nil
}

// UnmarshalJSON reads the list, whose entries are ["a", "b"] pairs or,
// in older files, "a b" strings.
func (v *mergesJSON) UnmarshalJSON(b []byte) error {
	s := scanner{b: b, name: `"model.merges"`}
	if s.null() {
		return nil
	}
	merges := mergesJSON{}
	err := s.list('[', ']', func() error {
		s.space()
		if s.i < len(s.b) && s.b[s.i] == '"' {
			text, err := s.str()
			if err != nil {
				return err
			}
			a, b, ok := strings.Cut(text, " ")
			if !ok || a == "" || b == "" || strings.Contains(b, " ") {
				return fmt.Errorf(`"model.merges"[%d]: %q is not two symbols separated by one space`, len(merges), text)
			}
			merges = append(merges, [2]string{a, b})
			return nil
		}
		var pair []string
		err := s.list('[', ']', func() error {
			sym, err := s.str()
			pair = append(pair, sym)
			return err
		})
		if err != nil || len(pair) != 2 || pair[0] == "" || pair[1] == "" {
			return fmt.Errorf(`"model.merges"[%d] is not a pair of two non-empty symbols`, len(merges))
		}
		merges = append(merges, [2]string{pair[0], pair[1]})
		return nil
	})
	if err != nil {
		return err
	}
	*v = merges
	return nil
}

// scanner reads JSON values that encoding/json has already checked.
type scanner struct {
	b    []byte
	i    int
	name string // the value scanned, for messages
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) expect(c byte) error {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != c {
		return fmt.Errorf("%s: want %q at byte %d of it", s.name, c, s.i)
	}
	s.i++
	return nil
}

func (s *scanner) null() bool {
	s.space()
	return strings.HasPrefix(string(s.b[s.i:min(s.i+4, len(s.b))]), "null")
}

// list reads an object or array delimited by open and close, calling item
// for each element.
func (s *scanner) list(open, close byte, item func() error) error {
	if err := s.expect(open); err != nil {
		return err
	}
	s.space()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return fmt.Errorf("%s: unexpected end", s.name)
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case close:
			s.i++
			return nil
		default:
			return fmt.Errorf("%s: want ',' or %q at byte %d of it", s.name, close, s.i)
		}
	}
}

// str reads a string; escapes and invalid UTF-8 go through encoding/json
// so that they decode exactly as it decodes them.
func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", fmt.Errorf("%s: want a string at byte %d of it", s.name, s.i)
	}
	start, plain := s.i, true
	for ; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			plain = false
			s.i++
		}
	}
	if s.i >= len(s.b) {
		return "", fmt.Errorf("%s: unterminated string", s.name)
	}
	raw := s.b[start:s.i]
	s.i++
	if plain && utf8.Valid(raw) {
		return string(raw), nil
	}
	var out string
	err := json.Unmarshal(s.b[start-1:s.i], &out)
	return out, err
}

// int reads a JSON number that must be an integer.
func (s *scanner) int() (int, error) {
	s.space()
	start := s.i
	for s.i < len(s.b) && strings.IndexByte("+-.0123456789eE", s.b[s.i]) >= 0 {
		s.i++
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil || start == s.i {
		end := s.i
		for end < len(s.b) && strings.IndexByte(",}] \t\r\n", s.b[end]) < 0 {
			end++
		}
		return 0, fmt.Errorf("the id %s is not an integer", s.b[start:end])
	}
	return n, nil
}

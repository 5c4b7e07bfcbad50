package textenc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// ReadPrompts reads one prompt per line of a UTF-8 file. A line that is
// not UTF-8 or holds nothing but spaces is an error naming it; a byte
// order mark, a final newline and Windows line ends are accepted.
func ReadPrompts(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("%s:%d: not valid UTF-8", path, line)
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("%s:%d: empty prompt (one prompt per line)", path, line)
		}
		out = append(out, string(b))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return out, nil
}

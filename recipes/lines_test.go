package recipes

import (
	"strings"
	"testing"
)

// The scanner finds the line of every key however it is written: tables,
// arrays of tables and sub-tables of their entries, dotted and quoted
// keys, inline tables, multi-line arrays and strings, comments.
func TestScanLines(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want map[string]int
	}{
		{"top level and tables", "a = 1\n# c\n\n[t]\nb = 2 # trailing\n[t.u]\nc = 'x'\n",
			map[string]int{"a": 1, "t": 4, "t.b": 5, "t.u": 6, "t.u.c": 7}},
		{"arrays of tables", "[[s]]\nk = 1\n[[s]]\n\nk = 2\n[s.sub]\nm = 3\n[[s]]\nk = 4\n",
			map[string]int{"s": 1, "s[0]": 1, "s[0].k": 2, "s[1]": 3, "s[1].k": 5, "s[1].sub": 6, "s[1].sub.m": 7, "s[2].k": 9}},
		{"dotted and quoted keys", "a.b = 1\n\"c d\".e = 2\n[ t . 'u' ]\nf = 3\n",
			map[string]int{"a": 1, "a.b": 1, `"c d"`: 2, `"c d".e`: 2, "t.u": 3, "t.u.f": 4}},
		{"inline tables", "t = { a = 1, b = { c = [1, 2] } }\nz = 0\n",
			map[string]int{"t.a": 1, "t.b.c": 1, "t.b.c[1]": 1, "z": 2}},
		{"multi-line arrays", "r = [\n  0.0, # zero\n  0.5,\n\n  [1, 2],\n]\nz = 0\n",
			map[string]int{"r": 1, "r[0]": 2, "r[1]": 3, "r[2]": 5, "r[2][1]": 5, "z": 7}},
		{"multi-line strings", "s = \"\"\"\nline [x] = 1\n\"\"\"\nt = '''\n# not a comment\n'''\nu = \"a\\\"b = [\"\nv = 1\n",
			map[string]int{"s": 1, "t": 4, "u": 7, "v": 8}},
		{"array of inline tables", "stage = [\n  { kind = \"distill\" },\n  { kind = \"train\", steps = 3 },\n]\n",
			map[string]int{"stage[0].kind": 2, "stage[1].kind": 3, "stage[1].steps": 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := scanLines(c.doc)
			for k, l := range c.want {
				if got.line[k] != l {
					t.Errorf("%s: line %d, want %d (all: %v)", k, got.line[k], l, got.line)
				}
			}
		})
	}
}

// A key not written in the file takes the line of its nearest written
// ancestor; display keys split at dots outside quotes and at indices.
func TestLineOfFallsBack(t *testing.T) {
	k := scanLines("[[stage]]\nkind = \"x\"\n[[stage]]\nkind = \"y\"\n")
	if got := k.lineOf("stage[1].lr"); got != 3 {
		t.Errorf("stage[1].lr: line %d, want its entry's 3", got)
	}
	if got := k.lineOf("eval.rho"); got != 0 {
		t.Errorf("eval.rho: line %d, want 0", got)
	}
	for key, parent := range map[string]string{"a.b[2]": "a.b", `a."x.y".c`: `a."x.y"`, "a": "", "s[1]": "s"} {
		if got := parentKey(key); got != parent {
			t.Errorf("parentKey(%q) = %q, want %q", key, got, parent)
		}
	}
}

// The scanner ends on any input, even text the TOML parser would reject
// (it only ever sees accepted text), and gives lines within the text.
func FuzzScanLines(f *testing.F) {
	f.Add(validRecipe)
	f.Add("a = [1, {b = 2}, \"\"\"x\n\"\"\"]\n[[s]]\n[s.t]\n'q'.r = '''\n'''\n")
	f.Add("a = ]\n[[\n{ = }\nb = \"unterminated")
	f.Fuzz(func(t *testing.T, doc string) {
		k := scanLines(doc)
		lines := strings.Count(doc, "\n") + 1
		for key, l := range k.line {
			if l < 1 || l > lines {
				t.Errorf("%s at line %d of a %d-line text", key, l, lines)
			}
		}
	})
}

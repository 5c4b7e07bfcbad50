package recipes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/dcdit/dcdit/editdist"
)

// Problem is one thing wrong with a recipe: where (file, line, key) and
// what (expected versus found).
type Problem struct {
	File string `json:"file"`
	Line int    `json:"line"` // 1-based; 0 when the key is not written in the file
	Key  string `json:"key"`  // display key ("stage[1].rho[2]"); empty for the whole file
	Msg  string `json:"message"`
}

// String formats the problem as FILE:LINE: KEY: MESSAGE.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error carries every problem found in a recipe, ordered by line.
type Error struct {
	File     string
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Problems returns the problems of err when it is (or wraps) an *Error,
// else a single problem holding err's message.
func Problems(err error) []Problem {
	var re *Error
	if errors.As(err, &re) {
		return re.Problems
	}
	return []Problem{{Msg: err.Error()}}
}

// LoadOptions adjust loading.
type LoadOptions struct {
	// BasePath, when set, replaces base.path (resolved against the current
	// folder, not the recipe's).
	BasePath string
	// OutDir, when set, replaces save.dir (resolved against the current
	// folder).
	OutDir string
	// Device and Precision, when set, replace device and precision.
	Device, Precision string
}

// Load reads, decodes, defaults and checks the recipe at path. Problems
// of the recipe itself come back together as an *Error; the checkpoint
// headers are not read (see Resolve).
func Load(path string, opts LoadOptions) (*Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{File: path, Msg: fmt.Sprintf("cannot read the recipe: %v", errors.Unwrap(err))}}}
	}
	return Parse(path, string(data), filepath.Dir(path), opts)
}

// Parse decodes a recipe from text. file names it in problems; dir is the
// folder relative paths are resolved against.
func Parse(file, text, dir string, opts LoadOptions) (_ *Recipe, err error) {
	p := &problems{file: file}
	defer func() {
		if v := recover(); v != nil { // a bug here must not take the caller down
			p.addLine(0, "", "internal error while reading the recipe: %v (please report it with the recipe)", v)
			err = p.err()
		}
	}()
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			p.addLine(pe.Position.Line, pe.LastKey, "TOML syntax: %s", pe.Message)
		} else {
			p.addLine(0, "", "TOML syntax: %v", err)
		}
		return nil, p.err()
	}
	p.lines = scanLines(text)

	// Types and unknown keys, every one, against the Go types.
	typeCheck(p, raw, reflect.TypeFor[Recipe](), "")
	if p.typeErrors > 0 {
		return nil, p.err()
	}
	r := &Recipe{File: file, Dir: dir, Text: text, lines: p.lines, defaults: map[string]bool{}, overrides: map[string]string{}}
	md, err := toml.Decode(text, r)
	if err != nil {
		// typeCheck accepts what the decoder accepts; keep its word anyway.
		p.addLine(tomlErrorLine(err), "", "%v", err)
		return nil, p.err()
	}
	// The decoder's own account of unknown keys: anything typeCheck let
	// through (it should be nothing) is still an error.
	for _, k := range md.Undecoded() {
		p.unknownUndecoded(k)
	}
	if opts.BasePath != "" {
		if r.Base == nil {
			r.Base = &Base{}
		}
		abs, err := filepath.Abs(opts.BasePath)
		if err != nil {
			abs = opts.BasePath
		}
		r.Base.Path = abs
		r.overrides["base.path"] = "--base"
	}
	if opts.OutDir != "" {
		abs, err := filepath.Abs(opts.OutDir)
		if err != nil {
			abs = opts.OutDir
		}
		r.Save.Dir = abs
		r.overrides["save.dir"] = "--out"
	}
	if opts.Device != "" {
		r.Device = opts.Device
		r.overrides["device"] = "--device"
	}
	if opts.Precision != "" {
		r.Precision = opts.Precision
		r.overrides["precision"] = "--precision"
	}
	has := definedKeys(raw)
	for k := range r.overrides {
		has[k] = true
	}
	applyDefaults(r, has, opts)
	check(p, r)
	if len(p.list) > 0 {
		return r, p.err()
	}
	return r, nil
}

// problems collects Problems for one file.
type problems struct {
	file       string
	lines      *keyLines
	list       []Problem
	typeErrors int
	seen       map[string]bool // unknown keys already reported
}

func (p *problems) addLine(line int, key, format string, args ...any) {
	p.list = append(p.list, Problem{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// add reports a problem at a display key, at the key's line (or its
// table's when the value came from a default).
func (p *problems) add(key, format string, args ...any) {
	line := 0
	if p.lines != nil {
		line = p.lines.lineOf(key)
	}
	p.addLine(line, key, format, args...)
}

// bad reports a value that is out of range: found versus expected.
func (p *problems) bad(key string, found any, expected string, args ...any) {
	p.add(key, "found %s, expected %s", show(found), fmt.Sprintf(expected, args...))
}

// show formats a decoded value for a value problem: strings quoted,
// numbers as written.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = formatFloat(f)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return describe(v)
}

// formatFloat writes a float as TOML would (1.0, 0.25, 1e-08).
func formatFloat(x float64) string {
	if x == float64(int64(x)) && x < 1e15 && x > -1e15 {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	sort.SliceStable(p.list, func(i, j int) bool {
		li, lj := p.list[i].Line, p.list[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0 // unlocated problems last
		}
		return li < lj
	})
	return &Error{File: p.file, Problems: p.list}
}

var tomlLineRE = regexp.MustCompile(`line (\d+)`)

func tomlErrorLine(err error) int {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Position.Line
	}
	if m := tomlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// unknownUndecoded reports a key the TOML decoder left undecoded, at every
// line where it is written (array-of-tables keys carry no index).
func (p *problems) unknownUndecoded(k toml.Key) {
	key := ""
	for _, seg := range k {
		key = childKey(key, seg)
	}
	keys, lines := p.lines.linesOfUnindexed(key)
	if len(keys) == 0 {
		keys, lines = []string{key}, []int{0}
	}
	for i, full := range keys {
		if p.seen[full] {
			continue
		}
		p.addLine(lines[i], full, "unknown key")
	}
}

// typeCheck walks a decoded TOML value against a Go type, reporting every
// value of the wrong type and every key the type does not have.
func typeCheck(p *problems, v any, t reflect.Type, key string) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(expected string) {
		p.typeErrors++
		p.add(key, "found %s, expected %s", describe(v), expected)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			wrong("a table")
			return
		}
		fields := tomlFields(t)
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			sub := childKey(key, k)
			f, ok := fields[k]
			if !ok {
				if p.seen == nil {
					p.seen = map[string]bool{}
				}
				p.seen[sub] = true
				p.add(sub, "unknown key%s; %s", suggest(k, t), validKeys(key, t))
				continue
			}
			typeCheck(p, m[k], f.Type, sub)
		}
	case reflect.Slice:
		elems, ok := asArray(v)
		if !ok {
			wrong(typeName(t))
			return
		}
		for i, e := range elems {
			typeCheck(p, e, t.Elem(), indexKey(key, i))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrong("a boolean (true or false)")
		}
	case reflect.Int, reflect.Int64:
		if _, ok := v.(int64); !ok {
			wrong("an integer")
		}
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
		case int64:
			if x > 1<<53 || x < -(1<<53) {
				wrong("a number a float64 holds exactly")
			}
		default:
			wrong("a number")
		}
	default:
		wrong(t.String())
	}
}

func asArray(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case []map[string]any:
		out := make([]any, len(a))
		for i, m := range a {
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// tomlFields maps a struct's TOML keys to its fields.
func tomlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if name == "" {
			continue
		}
		out[name] = f
	}
	return out
}

// tomlName is a field's TOML key, or "" when it has none.
func tomlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if tag == "-" || tag == "" {
		return ""
	}
	return tag
}

// orderedKeys lists a struct's TOML keys in declaration order.
func orderedKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if n := tomlName(t.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func validKeys(table string, t reflect.Type) string {
	where := "at the top level"
	if table != "" {
		where = "in [" + stripIndices(table) + "]"
	}
	return fmt.Sprintf("valid keys %s: %s", where, strings.Join(orderedKeys(t), ", "))
}

// suggest proposes the closest valid key of t for a misspelt one.
func suggest(k string, t reflect.Type) string {
	best, bestD := "", 3
	for _, name := range orderedKeys(t) {
		if strings.EqualFold(name, k) {
			return fmt.Sprintf(" (did you mean %s? keys are case-sensitive)", name)
		}
		if d := editdist.Distance(strings.ToLower(k), name); d < bestD {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// typeName describes a Go type as a TOML value.
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "a table"
	case reflect.Slice:
		e := t.Elem()
		switch e.Kind() {
		case reflect.Struct:
			return "an array of tables"
		case reflect.Float64:
			return "an array of numbers"
		case reflect.Int, reflect.Int64:
			return "an array of integers"
		case reflect.String:
			return "an array of strings"
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}

// describe names a decoded TOML value and shows it.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("a string (%q)", x)
	case bool:
		return fmt.Sprintf("a boolean (%v)", x)
	case int64:
		return fmt.Sprintf("an integer (%d)", x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return fmt.Sprintf("a float (%s)", formatFloat(x))
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case []int:
		return fmt.Sprint(x)
	case []string:
		return fmt.Sprintf("%q", x)
	case time.Time:
		return fmt.Sprintf("a date-time (%v)", x)
	}
	return fmt.Sprintf("%v", v)
}

// definedKeys lists the display keys present in a decoded document.
func definedKeys(raw map[string]any) map[string]bool {
	out := map[string]bool{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		if key != "" {
			out[key] = true
		}
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				walk(childKey(key, k), sub)
			}
		default:
			if elems, ok := asArray(v); ok {
				for i, e := range elems {
					walk(indexKey(key, i), e)
				}
			}
		}
	}
	walk("", raw)
	return out
}

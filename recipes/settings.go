package recipes

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Setting is one value of a defaulted recipe.
type Setting struct {
	Key     string `json:"key"`     // display key ("stage[0].lr")
	Value   string `json:"value"`   // as TOML would write it
	Default bool   `json:"default"` // filled in by a default, not written in the file
	// Source is where the value comes from: "file", "default", or the
	// flag that overrode it ("--base", "--out").
	Source string `json:"source"`
	Line   int    `json:"line,omitempty"` // its line in the file
}

// Settings lists every value of the recipe in declaration order, marking
// those that came from defaults, so a plan shows exactly what a run uses.
func (r *Recipe) Settings() []Setting {
	var out []Setting
	var walk func(key string, v reflect.Value)
	walk = func(key string, v reflect.Value) {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		switch {
		case v.Kind() == reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				if name := tomlName(t.Field(i)); name != "" {
					walk(childKey(key, name), v.Field(i))
				}
			}
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
			for i := range v.Len() {
				walk(indexKey(key, i), v.Index(i))
			}
		default:
			s := Setting{Key: key, Value: tomlValue(v), Default: r.defaults[key], Source: "file"}
			switch {
			case r.overrides[key] != "":
				s.Source = r.overrides[key]
			case s.Default:
				s.Source = "default"
			case r.lines != nil && r.lines.has(key):
				s.Line = r.lines.line[key]
			}
			out = append(out, s)
		}
	}
	walk("", reflect.ValueOf(r).Elem())
	return out
}

// tomlValue formats a scalar or a slice of scalars as TOML.
func tomlValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		f := v.Float()
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") { // keep floats looking like floats
			s += ".0"
		}
		return s
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = tomlValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}

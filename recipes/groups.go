package recipes

import (
	"fmt"
	"path"
	"strings"

	"github.com/dcdit/dcdit/editdist"
	"github.com/dcdit/dcdit/params"
)

// checkSelector reports why a trainable/frozen entry is neither a group
// name nor a valid glob pattern ("" when it is fine).
func checkSelector(s string) string {
	if params.IsGroup(s) {
		return ""
	}
	if !strings.ContainsAny(s, ".*?[") {
		names := params.GroupNames()
		msg := fmt.Sprintf("expected a group (%s) or a glob pattern over parameter names such as \"hnet.encoder.*\"", strings.Join(names, ", "))
		if g := closest(s, names); g != "" {
			msg = fmt.Sprintf("did you mean %s? %s", g, msg)
		}
		return msg
	}
	if _, err := path.Match(s, ""); err != nil {
		return fmt.Sprintf("expected a valid glob pattern: %v", err)
	}
	return ""
}

// matches reports whether a trainable/frozen entry selects the named
// parameter, whose groups are groups.
func matches(sel, name string, groups []string) bool {
	if params.IsGroup(sel) {
		return params.InGroup(sel, groups)
	}
	ok, _ := path.Match(sel, name)
	return ok
}

// Trains reports whether the stage trains the named parameter: some
// trainable entry selects it and no frozen entry does. groups are the
// parameter's groups, as its model's ParamGroups answers them (a DC
// model's: dc.Model.ParamGroups; planned from headers: dc.ParamGroups
// with the backbone family's Spec).
func (s *Stage) Trains(name string, groups []string) bool {
	sel := false
	for _, t := range s.Trainable {
		if matches(t, name, groups) {
			sel = true
			break
		}
	}
	if !sel {
		return false
	}
	for _, f := range s.Frozen {
		if matches(f, name, groups) {
			return false
		}
	}
	return true
}

func closest(s string, choices []string) string {
	best, bestD := "", 3
	for _, c := range choices {
		if d := editdist.Distance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

package params

import (
	"strings"
	"testing"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		specs []Spec
		want  string
	}{
		{"zero rows", []Spec{{"w", 0, 3}}, `"w" has shape [0 3]`},
		{"negative cols", []Spec{{"b", 2, -1}}, `"b" has shape [2 -1]`},
		{"duplicate", []Spec{{"w", 1, 1}, {"w", 2, 2}}, `"w" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.specs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	s, err := New([]Spec{{"w", 2, 3}, {"b", 2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 8 || len(s.Grad) != 8 {
		t.Fatalf("arena lengths %d/%d, want 8", s.Len(), len(s.Grad))
	}
	w, b := s.Get("w"), s.Get("b")
	wl, wh, _ := s.Range("w")
	bl, bh, _ := s.Range("b")
	if _, _, ok := s.Range("x"); wl != 0 || wh != 6 || bl != 6 || bh != 8 || ok {
		t.Fatalf("ranges w [%d,%d) b [%d,%d)", wl, wh, bl, bh)
	}
	b.Values()[1] = 5
	if s.Data[7] != 5 {
		t.Fatal("Values is not a view of the arena")
	}
	if got := s.List(); len(got) != 2 || got[0] != w || got[1] != b {
		t.Fatal("List is not in arena order")
	}
}

// A name the set does not hold: Lookup says so, Get panics naming it and
// the closest names the set holds instead of returning a nil *Param that
// would crash later inside an op without a name.
func TestUnknownName(t *testing.T) {
	s, err := New([]Spec{{"blocks.0.attn.qkv.weight", 2, 3}, {"blocks.0.attn.qkv.bias", 2, 1}, {"blocks.0.mlp.fc1.weight", 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Lookup("blocks.0.attn.qkv.bias"); !ok || p != s.Get("blocks.0.attn.qkv.bias") {
		t.Fatal("Lookup does not find a held name")
	}
	empty, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		set  *Set
		ask  string
		want string
	}{
		{"misspelt", s, "blocks.0.attn.qvk.weight", `params: no parameter "blocks.0.attn.qvk.weight" among the set's 3; closest: "blocks.0.attn.qkv.weight"`},
		{"wrong block", s, "blocks.1.attn.qkv.bias", `closest: "blocks.0.attn.qkv.bias"`},
		{"far", s, "x", `closest: "blocks.0.attn.qkv.bias"`},
		{"empty set", empty, "w", `params: no parameter "w": the set is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, ok := tt.set.Lookup(tt.ask); ok || p != nil {
				t.Errorf("Lookup(%q) = %v, %v; want nil, false", tt.ask, p, ok)
			}
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tt.want) {
					t.Errorf("Get(%q) panicked with %q, want it to contain %q", tt.ask, msg, tt.want)
				}
			}()
			tt.set.Get(tt.ask)
			t.Errorf("Get(%q) returned", tt.ask)
		})
	}
}

// AddPrefix renames in place: the new names answer, the old ones do not,
// the parameters and their ranges stay, and the set then joins with a set
// that holds the old names.
func TestAddPrefix(t *testing.T) {
	s, _ := New([]Spec{{"w", 2, 3}, {"b", 2, 1}})
	w, b := s.Get("w"), s.Get("b")
	s.AddPrefix("backbone.")
	if got, ok := s.Lookup("backbone.w"); !ok || got != w || w.Name != "backbone.w" {
		t.Fatalf("Lookup(backbone.w) = %v, %v", got, ok)
	}
	if _, ok := s.Lookup("w"); ok {
		t.Fatal("the old name still answers")
	}
	if lo, hi, ok := s.Range("backbone.b"); !ok || lo != 6 || hi != 8 {
		t.Fatalf("Range(backbone.b) = [%d,%d) %v, want [6,8)", lo, hi, ok)
	}
	if l := s.List(); l[0] != w || l[1] != b || b.Name != "backbone.b" {
		t.Fatal("List changed order or names")
	}
	other, _ := New([]Spec{{"w", 1, 1}})
	j, err := Join(other, s)
	if err != nil {
		t.Fatal(err)
	}
	if j.Get("backbone.w") != w || j.Len() != 9 {
		t.Fatal("the joint set does not hold the renamed parameters")
	}
}

// The groups have distinct names, each with a description; GroupAll holds
// every parameter, the others those whose groups list them.
func TestGroups(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range Groups() {
		if g.Name == "" || g.Doc == "" || seen[g.Name] || !IsGroup(g.Name) {
			t.Errorf("group %+v: want a new name and a description", g)
		}
		seen[g.Name] = true
	}
	for _, tt := range []struct {
		group  string
		groups []string
		want   bool
	}{
		{GroupAll, nil, true},
		{GroupAll, []string{GroupMLP}, true},
		{GroupMLP, []string{GroupBackbone, GroupMLP}, true},
		{GroupAttention, []string{GroupBackbone, GroupMLP}, false},
		{GroupScaffold, nil, false},
	} {
		if got := InGroup(tt.group, tt.groups); got != tt.want {
			t.Errorf("InGroup(%s, %v) = %v, want %v", tt.group, tt.groups, got, tt.want)
		}
	}
	if IsGroup("embedder") {
		t.Error(`IsGroup("embedder") = true`)
	}
}

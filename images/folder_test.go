package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// walkRef is testdata/walk.json (see testdata/README.md).
type walkRef struct {
	Torchvision string
	Extensions  []string
	Tree        [][]string
	Classes     []string
	Samples     []struct {
		Rel   string
		Label int
	}
}

// build makes the tree of a walkRef under root: ["d", path] a folder,
// ["f", path] an empty file, ["l", path, target] a symbolic link.
func build(t testing.TB, root string, tree [][]string) {
	t.Helper()
	for _, n := range tree {
		p := filepath.Join(root, filepath.FromSlash(n[1]))
		var err error
		switch n[0] {
		case "d":
			err = os.MkdirAll(p, 0o755)
		case "f":
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, nil, 0o644)
			}
		case "l":
			err = os.Symlink(filepath.FromSlash(n[2]), p)
		default:
			err = fmt.Errorf("unknown node kind %q", n[0])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Walk lists a tree probing order, case, hidden names and links exactly as
// torchvision's ImageFolder does.
func TestWalkMatchesTorchvision(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "walk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref walkRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("testdata/walk.json: %v", err)
	}
	if !slices.Equal(ref.Extensions, Extensions()) {
		t.Errorf("extensions %v, torchvision %s has %v", Extensions(), ref.Torchvision, ref.Extensions)
	}
	root := t.TempDir()
	build(t, root, ref.Tree)
	f, err := Walk(root, WalkOptions{Layout: Classes})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Classes, ref.Classes) {
		t.Errorf("classes %q, torchvision %s: %q", f.Classes, ref.Torchvision, ref.Classes)
	}
	var got, want []string
	for _, e := range f.Entries {
		got = append(got, fmt.Sprintf("%d %s", e.Label, e.Rel))
		if e.Path != filepath.Join(root, filepath.FromSlash(e.Rel)) {
			t.Errorf("entry %q: path %q", e.Rel, e.Path)
		}
	}
	for _, s := range ref.Samples {
		want = append(want, fmt.Sprintf("%d %s", s.Label, s.Rel))
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries differ from torchvision %s's\n got %q\nwant %q", ref.Torchvision, got, want)
	}
}

func TestWalkLayouts(t *testing.T) {
	cases := []struct {
		name   string
		tree   [][]string
		opts   WalkOptions
		want   []string // "label rel", or nil when an error is wanted
		errHas string
	}{
		{"flat", [][]string{{"f", "b.png"}, {"f", "a.JPG"}, {"f", "c.txt"}}, WalkOptions{}, []string{"-1 a.JPG", "-1 b.png"}, ""},
		{"flat ignores folders", [][]string{{"f", "b.png"}, {"f", "d/x.png"}}, WalkOptions{Layout: Flat}, []string{"-1 b.png"}, ""},
		{"auto classes", [][]string{{"f", "y/1.png"}, {"f", "x/2.png"}, {"f", "notes.txt"}}, WalkOptions{}, []string{"0 x/2.png", "1 y/1.png"}, ""},
		{"auto ambiguous", [][]string{{"f", "a.png"}, {"f", "d/x.png"}}, WalkOptions{}, nil, "1 images beside 1 sub-folders"},
		{"classes ignore loose images", [][]string{{"f", "a.png"}, {"f", "d/x.png"}}, WalkOptions{Layout: Classes}, []string{"0 d/x.png"}, ""},
		{"empty classes", [][]string{{"f", "a/x.png"}, {"d", "b/c"}, {"f", "z/readme.txt"}}, WalkOptions{}, nil, "no image in the class folders b, z"},
		{"no class folder", [][]string{{"f", "a.png"}}, WalkOptions{Layout: Classes}, nil, "no class folder"},
		{"empty flat", [][]string{{"f", "a.txt"}}, WalkOptions{}, nil, "no images"},
		// Links back to the class folder or above are not entered; links
		// elsewhere are, as torchvision follows them.
		{"loops", [][]string{{"f", "c/a.png"}, {"l", "c/self", "."}, {"d", "c/d"}, {"l", "c/d/up", "../.."}, {"f", "c/d/b.png"},
			{"l", "c/e", "../e"}, {"f", "e/x/e.png"}, {"l", "e/x/back", "../../c/d"}}, WalkOptions{},
			[]string{"0 c/a.png", "0 c/d/b.png", "0 c/d/up/e/x/e.png", "0 c/e/x/e.png", "0 c/e/x/back/b.png",
				"1 e/x/e.png", "1 e/x/back/b.png", "1 e/x/back/up/c/a.png"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			build(t, root, c.tree)
			f, err := Walk(root, c.opts)
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.Contains(err.Error(), root) {
					t.Fatalf("error %v, want one naming %s and saying %q", err, root, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range f.Entries {
				got = append(got, fmt.Sprintf("%d %s", e.Label, e.Rel))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("entries %q, want %q", got, c.want)
			}
		})
	}
}

func TestWalkCaptions(t *testing.T) {
	tree := [][]string{{"f", "a/1.png"}, {"f", "a/2.png"}, {"f", "b/x/3.jpg"}}
	cases := []struct {
		name, jsonl string
		want        []string // captions in entry order, nil when an error is wanted
		errHas      string
	}{
		{"ok", `{"file": "b/x/3.jpg", "caption": "three"}` + "\n\n" + `{"file": "a/1.png", "caption": "one"}` + "\n" + `{"caption": "", "file": "a/2.png"}`,
			[]string{"one", "", "three"}, ""},
		{"missing", `{"file": "a/1.png", "caption": "one"}`, nil, `no caption for 2 of 3 images: "a/2.png", "b/x/3.jpg"`},
		{"orphan", `{"file": "a/1.png", "caption": "1"}` + "\n" + `{"file": "a/2.png", "caption": "2"}` + "\n" + `{"file": "b/x/3.jpg", "caption": "3"}` + "\n" + `{"file": "a/9.png", "caption": "9"}`,
			nil, `not images of the folder: "a/9.png"`},
		{"duplicate", `{"file": "a/1.png", "caption": "1"}` + "\n" + `{"file": "a/1.png", "caption": "again"}`, nil, `:2: a second caption for "a/1.png"`},
		{"malformed", `{"file": "a/1.png", "caption": 1}`, nil, ":1:"},
		{"no caption key", `{"file": "a/1.png"}`, nil, `:1: want both "file" and "caption"`},
		{"unknown key", `{"file": "a/1.png", "text": "x"}`, nil, ":1:"},
		{"two values", `{"file": "a/1.png", "caption": "1"} {}`, nil, ":1: more than one JSON value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			build(t, root, tree)
			capFile := filepath.Join(t.TempDir(), "captions.jsonl")
			if err := os.WriteFile(capFile, []byte(c.jsonl), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Walk(root, WalkOptions{Captions: capFile})
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.Contains(err.Error(), capFile) {
					t.Fatalf("error %v, want one naming %s and saying %q", err, capFile, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range f.Entries {
				got = append(got, e.Caption)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("captions %q, want %q", got, c.want)
			}
		})
	}
}

// FuzzWalk builds a random tree of folders, files and links (loops
// included) from the fuzz bytes and checks that Walk ends, agrees with
// itself, and returns entries that exist, carry image names and valid
// labels, in torchvision's order.
func FuzzWalk(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9})
	f.Add([]byte("\x00\x05\x13\x27\x33\x41\x58\x6a\x7c\x8e\x90\xa1\xb2\xc3"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64 {
			data = data[:64]
		}
		root := t.TempDir()
		names := []string{"a", "B", "a-b", "a b", ".h", "x.png", "y.JPG", "z.txt", "ü.webp", "c.tiff"}
		dirs := []string{"."}
		// Few links: each can double the paths to walk, as in
		// torchvision, and the check is of loops, not of sheer size.
		links := 0
		for _, b := range data {
			parent := dirs[int(b>>4)%len(dirs)]
			name := names[int(b)%len(names)]
			p := filepath.Join(root, parent, name)
			if _, err := os.Lstat(p); err == nil {
				continue
			}
			switch b >> 6 {
			case 0, 1:
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, filepath.Join(parent, name))
				}
			case 2:
				os.WriteFile(p, nil, 0o644)
			default:
				// A link to a folder already made: possibly an
				// ancestor, making a loop.
				target, err := filepath.Rel(filepath.Join(root, parent), filepath.Join(root, dirs[int(b)%len(dirs)]))
				if err == nil && links < 6 && os.Symlink(target, p) == nil {
					links++
				}
			}
		}
		for _, layout := range []Layout{Auto, Classes, Flat} {
			a, errA := Walk(root, WalkOptions{Layout: layout})
			b, errB := Walk(root, WalkOptions{Layout: layout})
			if (errA == nil) != (errB == nil) {
				t.Fatalf("layout %d: walks disagree: %v, %v", layout, errA, errB)
			}
			if errA != nil {
				continue
			}
			if !slices.Equal(a.Entries, b.Entries) || !slices.Equal(a.Classes, b.Classes) {
				t.Fatalf("layout %d: two walks differ", layout)
			}
			if !slices.IsSorted(a.Classes) {
				t.Errorf("classes not sorted: %q", a.Classes)
			}
			last := -1
			for _, e := range a.Entries {
				if _, err := os.Lstat(e.Path); err != nil {
					t.Errorf("entry %q: %v", e.Rel, err)
				}
				if !IsImageName(e.Rel) {
					t.Errorf("entry %q is not an image name", e.Rel)
				}
				if a.Classes == nil && e.Label != -1 || a.Classes != nil && (e.Label < last || e.Label >= len(a.Classes)) {
					t.Errorf("entry %q: label %d after %d with %d classes", e.Rel, e.Label, last, len(a.Classes))
				}
				last = e.Label
			}
		}
	})
}

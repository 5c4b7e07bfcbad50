package images

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Extensions returns the file endings Walk takes for images, torchvision's
// IMG_EXTENSIONS, matched against the lower-cased name.
func Extensions() []string {
	return []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}
}

// IsImageName reports whether name ends with one of Extensions, ignoring
// case (torchvision's has_file_allowed_extension).
func IsImageName(name string) bool {
	lower := strings.ToLower(name)
	for _, e := range Extensions() {
		if strings.HasSuffix(lower, e) {
			return true
		}
	}
	return false
}

// Layout says how Walk reads a folder.
type Layout int

// The layouts.
const (
	// Auto reads class folders when the root has sub-folders and a flat
	// folder when it has none; a root holding both images and
	// sub-folders is refused as ambiguous.
	Auto Layout = iota
	// Classes reads the root as torchvision's ImageFolder does: each
	// sub-folder a class, labelled by its rank in name order, its images
	// found at any depth. Images directly in the root are ignored.
	Classes
	// Flat reads the images directly in the root, unlabelled, and
	// ignores sub-folders: a folder of samples.
	Flat
)

// WalkOptions adjusts Walk.
type WalkOptions struct {
	Layout Layout
	// Captions, when set, is a JSON Lines file with one object per image,
	//
	//	{"file": "class/sub/name.jpg", "caption": "a photo of …"}
	//
	// file being the image's Rel. Every image needs exactly one line and
	// every line an image; blank lines are skipped.
	Captions string
}

// Entry is one image of a Folder.
type Entry struct {
	Path    string // the file: the root joined with Rel
	Rel     string // the path below the root, separated by '/'
	Label   int    // index into Folder.Classes; −1 in a flat folder
	Caption string // from WalkOptions.Captions, else empty
}

// Folder is a listed image folder.
type Folder struct {
	Root    string
	Classes []string // sorted; nil for a flat folder
	Entries []Entry
}

// Walk lists the images under root in torchvision's order: classes sorted
// by name (byte order, which is Python's code-point order for UTF-8
// names); within a class, folders in the order of their full paths as
// strings (Python's sorted(os.walk(...)), so "a-b" comes before "a/x"),
// and files sorted by name within each folder. As torchvision does, Walk
// follows symbolic links to folders, keeps hidden files and folders (a
// ".ipynb_checkpoints" folder is a class), and refuses a class folder with
// no image anywhere below it, naming every such class.
//
// Two things differ, both where torchvision would go wrong quietly: a link
// back to a folder already being walked (a loop, which torchvision follows
// until the path is too long, listing its images dozens of times) is not
// entered, and a folder that cannot be read is an error instead of being
// skipped.
func Walk(root string, opts WalkOptions) (*Folder, error) {
	top, err := readDir(root)
	if err != nil {
		return nil, err
	}
	var dirs, files []string
	for _, e := range top {
		if e.dir {
			dirs = append(dirs, e.name)
		} else if IsImageName(e.name) {
			files = append(files, e.name)
		}
	}
	layout := opts.Layout
	if layout == Auto {
		switch {
		case len(dirs) > 0 && len(files) > 0:
			return nil, fmt.Errorf("images: %s: %d images beside %d sub-folders (e.g. %q and %q): choose the Classes layout (which ignores the images, as ImageFolder does) or the Flat one (which ignores the sub-folders)",
				root, len(files), len(dirs), files[0], dirs[0])
		case len(dirs) > 0:
			layout = Classes
		default:
			layout = Flat
		}
	}
	f := &Folder{Root: root}
	switch layout {
	case Flat:
		if len(files) == 0 {
			return nil, fmt.Errorf("images: %s: no images (extensions %s)", root, strings.Join(Extensions(), " "))
		}
		for _, name := range files {
			f.Entries = append(f.Entries, Entry{Path: filepath.Join(root, name), Rel: name, Label: -1})
		}
	case Classes:
		if len(dirs) == 0 {
			return nil, fmt.Errorf("images: %s: no class folder", root)
		}
		f.Classes = dirs
		var empty []string
		for label, class := range dirs {
			n := len(f.Entries)
			if f.Entries, err = walkClass(f.Entries, root, class, label); err != nil {
				return nil, err
			}
			if len(f.Entries) == n {
				empty = append(empty, class)
			}
		}
		if len(empty) > 0 {
			return nil, fmt.Errorf("images: %s: no image in the class folders %s (extensions %s)", root, strings.Join(empty, ", "), strings.Join(Extensions(), " "))
		}
	default:
		return nil, fmt.Errorf("images: %s: unknown layout %d", root, layout)
	}
	if opts.Captions != "" {
		if err := addCaptions(f.Entries, opts.Captions); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// dirEntry is a folder entry as Python's os.walk sorts it: a folder if it
// is one after following links (is_dir()), a file otherwise, broken links
// included.
type dirEntry struct {
	name string
	dir  bool
}

// readDir lists dir sorted by name.
func readDir(dir string) ([]dirEntry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	out := make([]dirEntry, len(des))
	for i, de := range des {
		isDir := de.IsDir()
		if de.Type()&fs.ModeSymlink != 0 {
			info, err := os.Stat(filepath.Join(dir, de.Name()))
			isDir = err == nil && info.IsDir()
		}
		out[i] = dirEntry{de.Name(), isDir}
	}
	return out, nil
}

// walkClass appends the images below root/class, in torchvision's order.
func walkClass(entries []Entry, root, class string, label int) ([]Entry, error) {
	type folder struct {
		rel   string // below the class folder, "" for itself
		files []string
	}
	var folders []folder
	// ancestors holds the folders on the path being walked, to tell a
	// link back to one of them.
	var ancestors []os.FileInfo
	var visit func(rel string) error
	visit = func(rel string) error {
		dir := filepath.Join(root, class, filepath.FromSlash(rel))
		info, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("images: %w", err)
		}
		for _, a := range ancestors {
			if os.SameFile(a, info) {
				return nil
			}
		}
		list, err := readDir(dir)
		if err != nil {
			return err
		}
		ancestors = append(ancestors, info)
		defer func() { ancestors = ancestors[:len(ancestors)-1] }()
		fo := folder{rel: rel}
		for _, e := range list {
			switch {
			case e.dir:
				if err := visit(path.Join(rel, e.name)); err != nil {
					return err
				}
			case IsImageName(e.name):
				fo.files = append(fo.files, e.name)
			}
		}
		folders = append(folders, fo)
		return nil
	}
	if err := visit(""); err != nil {
		return nil, err
	}
	// Python sorts os.walk's (root, dirs, files) tuples by root, whose
	// common prefix is the class folder: comparing "/"+rel is the same.
	slices.SortFunc(folders, func(a, b folder) int {
		return strings.Compare(slashed(a.rel), slashed(b.rel))
	})
	for _, fo := range folders {
		for _, name := range fo.files {
			rel := path.Join(class, fo.rel, name)
			entries = append(entries, Entry{Path: filepath.Join(root, filepath.FromSlash(rel)), Rel: rel, Label: label})
		}
	}
	return entries, nil
}

func slashed(rel string) string {
	if rel == "" {
		return ""
	}
	return "/" + rel
}

// addCaptions reads the captions file and gives each entry its caption.
func addCaptions(entries []Entry, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("images: captions: %w", err)
	}
	byRel := make(map[string]string, len(entries))
	line := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var rec struct {
			File    *string `json:"file"`
			Caption *string `json:"caption"`
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("images: %s:%d: %v (want {\"file\": …, \"caption\": …})", file, line, err)
		}
		if dec.More() {
			return fmt.Errorf("images: %s:%d: more than one JSON value on the line", file, line)
		}
		if rec.File == nil || rec.Caption == nil {
			return fmt.Errorf("images: %s:%d: want both \"file\" and \"caption\"", file, line)
		}
		if _, dup := byRel[*rec.File]; dup {
			return fmt.Errorf("images: %s:%d: a second caption for %q", file, line, *rec.File)
		}
		byRel[*rec.File] = *rec.Caption
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("images: %s: %w", file, err)
	}
	var missing []string
	used := make(map[string]bool, len(entries))
	for i := range entries {
		c, ok := byRel[entries[i].Rel]
		if !ok {
			missing = append(missing, entries[i].Rel)
			continue
		}
		entries[i].Caption = c
		used[entries[i].Rel] = true
	}
	var orphans []string
	for rel := range byRel {
		if !used[rel] {
			orphans = append(orphans, rel)
		}
	}
	slices.Sort(orphans)
	switch {
	case len(missing) > 0:
		return fmt.Errorf("images: %s: no caption for %d of %d images: %s", file, len(missing), len(entries), firstFew(missing))
	case len(orphans) > 0:
		return fmt.Errorf("images: %s: captions for %d files that are not images of the folder: %s", file, len(orphans), firstFew(orphans))
	}
	return nil
}

// firstFew quotes up to five names, saying how many more there are.
func firstFew(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(names)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}

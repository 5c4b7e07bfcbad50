package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mapFile is the package map the test reads, relative to the module root.
const mapFile = "docs/packages.md"

// The layers the rules name by name.
const (
	testHelpers = "test helpers" // may import any backbone; only tests and other helpers import them
	cliLayer    = "CLI"          // tests outside the CLI may not import it
)

// registries are the packages that wire the backbone families together (the
// family registry and the package that imports every family into it): they
// import concrete backbones by design.
func registries() []string {
	return []string{"families"}
}

// debt is an import that breaks a rule today, and why it is there.
type debt struct {
	from, to string // package paths relative to the module
	why      string
}

// backboneDebt lists the product packages that import a concrete backbone
// from outside its family, and what they take from it. The family registry
// answers these questions behind one interface; when an import goes, the
// test asks for its entry to go too, so the list only shrinks.
func backboneDebt() []debt {
	return nil
}

// upwardDebt lists the imports that run against the layer order.
func upwardDebt() []debt {
	return nil
}

// TestImports checks every import of every package in the module, test
// imports included, against the package map.
func TestImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH: the layering test runs `go list`")
	}
	var mod struct{ Path, Dir string }
	if err := json.Unmarshal(run(t, "", nil, "list", "-m", "-json"), &mod); err != nil {
		t.Fatalf("go list -m -json: %v", err)
	}
	text, err := os.ReadFile(filepath.Join(mod.Dir, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMap(string(text))
	if err != nil {
		t.Fatalf("%s: %v", mapFile, err)
	}
	touchSources(t, mod.Dir)
	pkgs := listPackages(t, mod.Dir, mod.Path)
	where, problems := m.place(slices.Sorted(maps.Keys(pkgs)))
	if len(problems) > 0 {
		t.Fatalf("%s does not place the module's packages:\n%s", mapFile, strings.Join(problems, "\n"))
	}
	for _, r := range registries() {
		if _, ok := pkgs[r]; !ok {
			t.Errorf("registry %s is not a package of the module: delete it from registries", r)
		}
	}

	upward := map[[2]string]bool{}
	backbone := map[[2]string]bool{}
	for p, imps := range pkgs {
		lp := where[p]
		for _, q := range imps.imports {
			lq := where[q]
			if lq.layer < lp.layer {
				upward[[2]string{p, q}] = true
			}
			if lq.backbone && !m.sameFamily(p, q) && !slices.Contains(registries(), p) && m.layers[lp.layer] != testHelpers {
				backbone[[2]string{p, q}] = true
			}
		}
		for _, q := range imps.testImports {
			name := m.layers[lp.layer]
			if m.layers[where[q].layer] == cliLayer && name != cliLayer && name != testHelpers {
				t.Errorf("the tests of %s import %s: only the CLI's own tests import the CLI", p, q)
			}
		}
	}
	checkDebt(t, "upwardDebt", upward, upwardDebt(), func(p, q string) string {
		return fmt.Sprintf("%s (layer %q) imports %s (layer %q, above it in %s): move one of them, or take what %s needs down",
			p, m.layers[where[p].layer], q, m.layers[where[q].layer], mapFile, p)
	})
	checkDebt(t, "backboneDebt", backbone, backboneDebt(), func(p, q string) string {
		return fmt.Sprintf("%s imports the concrete backbone %s: only %s's family, the family registries, test helpers and tests may; go through the family registry",
			p, q, m.family(q))
	})
}

// checkDebt reports the imports found that the allowlist lacks, and the
// allowlist's entries that no import needs any more.
func checkDebt(t *testing.T, list string, found map[[2]string]bool, allowed []debt, broken func(p, q string) string) {
	t.Helper()
	listed := map[[2]string]bool{}
	for _, d := range allowed {
		e := [2]string{d.from, d.to}
		if listed[e] {
			t.Errorf("%s lists %s → %s twice", list, d.from, d.to)
		}
		listed[e] = true
		if !found[e] {
			t.Errorf("%s → %s is gone: delete its entry from %s in internal/layering/layering_test.go", d.from, d.to, list)
		}
	}
	var errs []string
	for e := range found {
		if !listed[e] {
			errs = append(errs, broken(e[0], e[1]))
		}
	}
	slices.Sort(errs)
	for _, e := range errs {
		t.Error(e)
	}
}

// imports are a package's imports within the module, outside its tests and
// in them.
type imports struct {
	imports, testImports []string
}

// listPackages runs go list over the module and returns each package's
// imports within the module, by path relative to the module root. It lists
// twice: for the host, and for a platform on the other side of every build
// constraint in the tree (the generic kernels, the non-unix files).
func listPackages(t *testing.T, dir, module string) map[string]imports {
	t.Helper()
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	add := func(dst []string, src []string) []string {
		for _, p := range src {
			if r, ok := rel(p); ok && !slices.Contains(dst, r) {
				dst = append(dst, r)
			}
		}
		return dst
	}
	pkgs := map[string]imports{}
	for _, env := range [][]string{nil, {"GOOS=windows", "GOARCH=arm64", "GOFLAGS=-tags=purego"}} {
		out := run(t, dir, env, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "./...")
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath                         string
				Imports, TestImports, XTestImports []string
				Error                              *struct{ Err string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("go list (%s): %v", strings.Join(env, " "), err)
			}
			if p.Error != nil {
				t.Fatalf("go list (%s): %s: %s", strings.Join(env, " "), p.ImportPath, p.Error.Err)
			}
			r, _ := rel(p.ImportPath)
			imps := pkgs[r]
			imps.imports = add(imps.imports, p.Imports)
			imps.testImports = add(add(imps.testImports, p.TestImports), p.XTestImports)
			pkgs[r] = imps
		}
	}
	return pkgs
}

// run runs the go tool in dir with env added to the test's environment.
func run(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s (%s): %v\n%s", strings.Join(args, " "), strings.Join(env, " "), err, stderr.Bytes())
	}
	return out
}

// layerMap is the table of docs/packages.md.
type layerMap struct {
	layers []string // top first
	rows   []row
}

// row is one package row of the table.
type row struct {
	spec     string // a package path relative to the module, or path/... for it and all below it
	layer    int    // index into layers
	backbone bool   // marked * : a concrete backbone
	line     int    // in the file, for messages
}

// placement is where the map puts a package.
type placement struct {
	layer    int
	backbone bool
}

var specRE = regexp.MustCompile(`^[a-z0-9_]+(/[a-z0-9_]+)*(/\.\.\.)?$`)

// parseMap reads the table, the first fenced block of the package map: a
// header row whose "package" gives the column where packages start; a row
// with text left of that column opens a layer; a row with a word starting
// at it names a package, followed by * for a backbone; the rest describes.
func parseMap(text string) (layerMap, error) {
	lines := strings.Split(text, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "```") })
	if start < 0 {
		return layerMap{}, errors.New("no fenced block holds the package table")
	}
	end := slices.IndexFunc(lines[start+1:], func(l string) bool { return strings.HasPrefix(l, "```") })
	if end < 0 {
		return layerMap{}, fmt.Errorf("line %d: the package table's fenced block does not end", start+1)
	}
	var m layerMap
	col := -1
	for i, l := range lines[start+1 : start+1+end] {
		n := start + 2 + i
		r := []rune(strings.TrimRight(l, " "))
		if len(r) == 0 {
			continue
		}
		if col < 0 {
			col = strings.Index(string(r), "package")
			if !strings.HasPrefix(string(r), "layer") || col < 0 {
				return layerMap{}, fmt.Errorf("line %d: the table's header %q, want \"layer  package  what it holds\"", n, l)
			}
			col = len([]rune(string(r)[:col]))
			continue
		}
		if name := strings.TrimSpace(string(r[:min(col, len(r))])); name != "" {
			if r[col-1] != ' ' && len(r) > col {
				return layerMap{}, fmt.Errorf("line %d: layer name %q runs into the package column", n, name)
			}
			if slices.Contains(m.layers, name) {
				return layerMap{}, fmt.Errorf("line %d: layer %q appears twice", n, name)
			}
			m.layers = append(m.layers, name)
		}
		if len(r) <= col || r[col] == ' ' {
			continue
		}
		if len(m.layers) == 0 {
			return layerMap{}, fmt.Errorf("line %d: a package before the first layer", n)
		}
		f := strings.Fields(string(r[col:]))
		if !specRE.MatchString(f[0]) {
			return layerMap{}, fmt.Errorf("line %d: %q in the package column is not a package path", n, f[0])
		}
		bb := len(f) > 1 && f[1] == "*"
		if bb && strings.HasSuffix(f[0], "/...") {
			return layerMap{}, fmt.Errorf("line %d: %s: a backbone is one package, not a pattern", n, f[0])
		}
		m.rows = append(m.rows, row{spec: f[0], layer: len(m.layers) - 1, backbone: bb, line: n})
	}
	for _, name := range []string{testHelpers, cliLayer} {
		if !slices.Contains(m.layers, name) {
			return layerMap{}, fmt.Errorf("the table has no layer %q", name)
		}
	}
	return m, nil
}

// matches says whether the row names package p.
func (r row) matches(p string) bool {
	if dir, ok := strings.CutSuffix(r.spec, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == r.spec
}

// place finds each package's row; every package must be in exactly one,
// and every row must name at least one package.
func (m layerMap) place(pkgs []string) (map[string]placement, []string) {
	where := map[string]placement{}
	used := make([]bool, len(m.rows))
	var problems []string
	for _, p := range pkgs {
		var in []int
		for i, r := range m.rows {
			if r.matches(p) {
				in = append(in, i)
				used[i] = true
			}
		}
		switch len(in) {
		case 0:
			problems = append(problems, fmt.Sprintf("package %s is in no row: add it to the lowest layer whose packages it needs", p))
		case 1:
			where[p] = placement{layer: m.rows[in[0]].layer, backbone: m.rows[in[0]].backbone}
		default:
			problems = append(problems, fmt.Sprintf("package %s is in the rows of lines %d and %d", p, m.rows[in[0]].line, m.rows[in[1]].line))
		}
	}
	for i, r := range m.rows {
		if !used[i] {
			problems = append(problems, fmt.Sprintf("line %d: %s names no package of the module", r.line, r.spec))
		}
	}
	return where, problems
}

// family returns the root of backbone q's family: the shortest backbone row
// that is q or a folder above it.
func (m layerMap) family(q string) string {
	root := q
	for _, r := range m.rows {
		if r.backbone && (q == r.spec || strings.HasPrefix(q, r.spec+"/")) && len(r.spec) < len(root) {
			root = r.spec
		}
	}
	return root
}

// sameFamily says whether p is in backbone q's family: the family's root or
// a package under it.
func (m layerMap) sameFamily(p, q string) bool {
	root := m.family(q)
	return p == root || strings.HasPrefix(p, root+"/")
}

// TestParseMap reads well-formed tables and names the line of a broken one.
func TestParseMap(t *testing.T) {
	const head = "text\n```\nlayer         package    what\n"
	cases := []struct {
		name, table string
		layers      []string
		rows        []row
		err         string // "" for accepted
	}{
		{
			name:   "layers, patterns, backbones, descriptions",
			table:  head + "test helpers  internal/x one\nCLI           cmd/...    two\n                         more words\n\nbottom        a *        three\n              a/b *\n```\n",
			layers: []string{"test helpers", "CLI", "bottom"},
			rows: []row{
				{spec: "internal/x", layer: 0, line: 4},
				{spec: "cmd/...", layer: 1, line: 5},
				{spec: "a", layer: 2, backbone: true, line: 8},
				{spec: "a/b", layer: 2, backbone: true, line: 9},
			},
		},
		{name: "no block", table: "text\n", err: "no fenced block"},
		{name: "unended block", table: head, err: "does not end"},
		{name: "no header", table: "```\nCLI  cmd\n```\n", err: "line 2: the table's header"},
		{name: "package before a layer", table: head + "              cmd\n```\n", err: "line 4: a package before the first layer"},
		{name: "not a path", table: head + "CLI           Cmd.go\n```\n", err: `line 4: "Cmd.go"`},
		{name: "backbone pattern", table: head + "CLI           cmd/... *\n```\n", err: "line 4: cmd/...: a backbone is one package"},
		{name: "long layer name", table: head + "a long layer name\n```\n", err: `line 4: layer name "a long layer n" runs into the package column`},
		{name: "layer twice", table: head + "CLI           a\nCLI           b\n```\n", err: `line 5: layer "CLI" appears twice`},
		{name: "missing layer", table: head + "CLI           a\n```\n", err: `no layer "test helpers"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := parseMap(c.table)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.layers, c.layers) || !slices.Equal(m.rows, c.rows) {
				t.Errorf("got layers %q rows %+v, want %q %+v", m.layers, m.rows, c.layers, c.rows)
			}
		})
	}
}

// TestFamily: a backbone's family is its topmost backbone folder and every
// package under it, and only that.
func TestFamily(t *testing.T) {
	m := layerMap{rows: []row{{spec: "dit", backbone: true}, {spec: "dit/ddpm", backbone: true}, {spec: "dc/hnet", backbone: true}, {spec: "dc"}}}
	cases := []struct {
		p, q string
		same bool
	}{
		{"dit", "dit/ddpm", true},
		{"dit/ddpm", "dit", true},
		{"dit/ddpm/x", "dit", true},
		{"dc/hnet", "dit", false},
		{"dc", "dc/hnet", false},
		{"ditx", "dit", false},
		{"dc/hnet/sub", "dc/hnet", true},
	}
	for _, c := range cases {
		if got := m.sameFamily(c.p, c.q); got != c.same {
			t.Errorf("sameFamily(%s, %s) = %v, want %v", c.p, c.q, got, c.same)
		}
	}
}

// touchSources stats every Go file of the module, so that go test's result
// cache, which knows the files a test opens but not what `go list` reads
// for it, reruns the test when an import changes.
func touchSources(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "runs") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
			if _, err := os.Stat(path); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

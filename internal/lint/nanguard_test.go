package lint

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNaNPassingChecks fails for every numeric check in a _test.go file of
// the module that a NaN passes. The files are those the go command builds
// here (GOOS, GOARCH, no extra tags), type-checked from source.
//
// The rule. A failing branch is the body of an if statement, its else
// block, or the body of a case of a tagless switch, when one of the
// branch's own statements (directly, or inside a plain { } block, but not
// inside a nested if, for, switch, select or function literal, which make
// the failure conditional on something else) is
//   - a call of Error, Errorf, Fatal, Fatalf, Fail or FailNow on a value of
//     a type of package testing (T, B, F, TB), or
//   - a return statement one of whose results is a call of fmt.Errorf or
//     errors.New (a helper that reports a mismatch as an error).
//
// The branch is taken when its condition is true (if body, case body) or
// false (else block). Walking the condition through parentheses, ! (which
// flips the sense), && and ||, every ordered comparison (<, <=, >, >=)
// with a floating-point operand (float32, float64, or a type parameter
// whose type set holds one) that reaches the branch in the sense that
// takes it is reported: any ordered comparison with a NaN operand is
// false, so such a branch is skipped for NaN and the check passes. The
// same comparison under the other sense (if !(err <= tol) { t.Fatal() },
// or if err <= tol {} else { t.Fatal() }) is true for NaN and fails, as
// wanted; write checks that way or with fixtures.Within.
//
// Not reported: == and != and the comparisons that are their operands
// (x != want is true for NaN; x == 0 is not a bound), comparisons inside a
// call's arguments or assigned to a variable before the if (the rule reads
// the condition only; name a gate on a setting that way, dense :=
// budget > 1000, never a measured value), and comparisons in branches
// that fail only conditionally (a loop or an inner check decides; the
// inner check is then judged on its own).
func TestNaNPassingChecks(t *testing.T) {
	root, modPath := moduleRoot(t)
	l := newLoader(root, modPath)
	dirs, err := packageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, dir := range dirs {
		files, err := l.checkTests(dir)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, f := range files {
			for _, c := range nanPassing(l.fset, f.info, f.file) {
				found = append(found, c.String(root))
			}
		}
	}
	for _, c := range found {
		t.Errorf("%s: a NaN passes this check; write !(… <= tol) or fixtures.Within", c)
	}
	t.Logf("%d packages' tests checked", len(dirs))
}

// TestNaNPassingSelf runs the rule on small sources.
func TestNaNPassingSelf(t *testing.T) {
	const head = `package p
import ("errors"; "testing")
var _ = errors.New
type num interface{ ~float32 | ~float64 }
func f[T num](t *testing.T, err, tol float64, e32 float32, n, m int, g, h T) error {
`
	tests := []struct {
		name, body string
		want       []string // the reported comparisons
	}{
		{"err > tol fails", `if err > tol { t.Fatal() }`, []string{"err > tol"}},
		{"!(err <= tol)", `if !(err <= tol) { t.Fatal() }`, nil},
		{"tol < err", `if tol < err { t.Errorf("x") }`, []string{"tol < err"}},
		{"lower bound", `if err <= 1 { t.Error() }`, []string{"err <= 1"}},
		{"float32", `if e32 >= 1e-3 { t.Fail() }`, []string{"e32 >= 1e-3"}},
		{"type parameter", `if g > h { t.FailNow() }`, []string{"g > h"}},
		{"ints", `if n > m { t.Fatal() }`, nil},
		{"else branch", `if err <= tol {} else { t.Fatal() }`, nil},
		{"else of a bad bound", `if err > tol { t.Log() } else { t.Fatal() }`, nil},
		{"else of !", `if !(err > tol) { } else { t.Fatal() }`, []string{"err > tol"}},
		{"or", `if err > tol || !(e32 < 1) { t.Fatal() }`, []string{"err > tol"}},
		{"and under !", `if !(err <= tol && e32 <= 1) { t.Fatal() }`, nil},
		{"double !", `if !!(err > tol) { t.Fatal() }`, []string{"err > tol"}},
		{"no failure", `if err > tol { t.Log() }`, nil},
		{"gate", `if err > tol { for range n { t.Fatal() } }`, nil},
		{"gate of an inner check", `if err > 0 { if err > tol { t.Fatal() } }`, []string{"err > tol"}},
		{"plain block", `if err > tol { { t.Fatal() } }`, []string{"err > tol"}},
		{"returned error", `if err > tol { return errors.New("x") }`, []string{"err > tol"}},
		{"returned nil", `if err > tol { return nil }`, nil},
		{"switch", `switch { case err > tol: t.Error() }`, []string{"err > tol"}},
		{"tagged switch", `switch n { case 1: if !(err <= tol) { t.Error() } }`, nil},
		{"in a call", `if !ok(err > tol) { t.Fatal() }`, nil},
		{"func literal", `if err > tol { func() { t.Fatal() }() }`, nil},
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil) // shared: it type-checks testing once
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := head + tt.body + "\nreturn nil }\nfunc ok(b bool) bool { return b }\n"
			f, err := parser.ParseFile(fset, "p_test.go", src, 0)
			if err != nil {
				t.Fatal(err)
			}
			info := newInfo()
			conf := types.Config{Importer: imp}
			if _, err := conf.Check("p", fset, []*ast.File{f}, info); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range nanPassing(fset, info, f) {
				got = append(got, c.expr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
		})
	}
}

// check is one reported comparison.
type check struct {
	pos  token.Position
	expr string
}

func (c check) String(root string) string {
	name := c.pos.Filename
	if rel, err := filepath.Rel(root, name); err == nil {
		name = rel
	}
	return fmt.Sprintf("%s:%d: %s", name, c.pos.Line, c.expr)
}

// nanPassing returns the comparisons of f that the rule reports, in source
// order.
func nanPassing(fset *token.FileSet, info *types.Info, f *ast.File) []check {
	var out []check
	report := func(cond ast.Expr, sense bool) {
		for _, e := range orderedFloat(info, cond, sense) {
			out = append(out, check{fset.Position(e.Pos()), types.ExprString(e)})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.IfStmt:
			if fails(info, s.Body.List) {
				report(s.Cond, true)
			}
			if b, ok := s.Else.(*ast.BlockStmt); ok && fails(info, b.List) {
				report(s.Cond, false)
			}
		case *ast.SwitchStmt:
			if s.Tag != nil {
				break
			}
			for _, cc := range s.Body.List {
				cc := cc.(*ast.CaseClause)
				if fails(info, cc.Body) {
					for _, cond := range cc.List {
						report(cond, true)
					}
				}
			}
		}
		return true
	})
	return out
}

// orderedFloat returns the ordered floating-point comparisons that reach
// the truth of cond with the given sense (true: unnegated).
func orderedFloat(info *types.Info, cond ast.Expr, sense bool) []ast.Expr {
	switch e := cond.(type) {
	case *ast.ParenExpr:
		return orderedFloat(info, e.X, sense)
	case *ast.UnaryExpr:
		if e.Op == token.NOT {
			return orderedFloat(info, e.X, !sense)
		}
	case *ast.BinaryExpr:
		switch e.Op {
		case token.LAND, token.LOR:
			return append(orderedFloat(info, e.X, sense), orderedFloat(info, e.Y, sense)...)
		case token.LSS, token.LEQ, token.GTR, token.GEQ:
			if sense && (isFloat(info.TypeOf(e.X)) || isFloat(info.TypeOf(e.Y))) {
				return []ast.Expr{e}
			}
		}
	}
	return nil
}

// isFloat reports whether t is a floating-point type, or a type parameter
// whose type set holds one.
func isFloat(t types.Type) bool {
	if t == nil {
		return false
	}
	if tp, ok := t.(*types.TypeParam); ok {
		return termsFloat(tp.Constraint().Underlying())
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsFloat != 0
}

// termsFloat reports whether a constraint's type terms include a float.
func termsFloat(t types.Type) bool {
	switch c := t.(type) {
	case *types.Interface:
		for i := range c.NumEmbeddeds() {
			if termsFloat(c.EmbeddedType(i).Underlying()) {
				return true
			}
		}
	case *types.Union:
		for i := range c.Len() {
			if isFloat(c.Term(i).Type()) {
				return true
			}
		}
	case *types.Basic:
		return c.Info()&types.IsFloat != 0
	}
	return false
}

// fails reports whether one of stmts fails a test unconditionally (see
// TestNaNPassingChecks).
func fails(info *types.Info, stmts []ast.Stmt) bool {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.ExprStmt:
			if call, ok := s.X.(*ast.CallExpr); ok && testingFailure(info, call) {
				return true
			}
		case *ast.ReturnStmt:
			for _, r := range s.Results {
				if call, ok := r.(*ast.CallExpr); ok && (isFunc(info, call, "fmt", "Errorf") || isFunc(info, call, "errors", "New")) {
					return true
				}
			}
		case *ast.BlockStmt:
			if fails(info, s.List) {
				return true
			}
		case *ast.LabeledStmt:
			if fails(info, []ast.Stmt{s.Stmt}) {
				return true
			}
		}
	}
	return false
}

// testingFailure reports whether call is t.Error, t.Fatal and the like on
// a value of a type of package testing.
func testingFailure(info *types.Info, call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch sel.Sel.Name {
	case "Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow":
	default:
		return false
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	return ok && fn.Pkg() != nil && fn.Pkg().Path() == "testing"
}

// isFunc reports whether call calls the package-level function pkg.name.
func isFunc(info *types.Info, call *ast.CallExpr, pkg, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	return ok && fn.Name() == name && fn.Pkg() != nil && fn.Pkg().Path() == pkg
}

func newInfo() *types.Info {
	return &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{},
		Defs: map[*ast.Ident]types.Object{}, Instances: map[*ast.Ident]types.Instance{}}
}

// moduleRoot returns the directory holding go.mod above the working
// directory, and the module's path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for line := range strings.Lines(string(data)) {
				if p, ok := strings.CutPrefix(line, "module "); ok {
					return dir, strings.TrimSpace(p)
				}
			}
			t.Fatalf("%s: no module line", filepath.Join(dir, "go.mod"))
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}

// packageDirs lists the module's directories that hold Go files, skipping
// testdata, the directories the go command ignores (. and _ prefixes) and
// nested modules.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root {
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

// loader type-checks the module's packages from source: the module's own
// through a view (each once per view), the rest through the source
// importer.
type loader struct {
	fset          *token.FileSet
	root, modPath string
	ext           types.ImporterFrom
	base          *view
	imports       map[string][]string // a module package's module imports
}

func newLoader(root, modPath string) *loader {
	fset := token.NewFileSet()
	l := &loader{fset: fset, root: root, modPath: modPath,
		ext: importer.ForCompiler(fset, "source", nil).(types.ImporterFrom), imports: map[string][]string{}}
	l.base = &view{l: l, pkgs: map[string]*types.Package{}}
	return l
}

// view imports the module's packages, each type-checked once; a view with
// a test variant (a package type-checked with its internal tests, which an
// external test package imports) gives it in place of the package, and
// type-checks again every module package that depends on it, as the go
// command builds "p [p.test]".
type view struct {
	l       *loader
	variant *types.Package
	pkgs    map[string]*types.Package
}

func (v *view) Import(path string) (*types.Package, error) { return v.ImportFrom(path, v.l.root, 0) }

func (v *view) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	l := v.l
	pkgDir, ok := l.dir(path)
	if !ok {
		return l.ext.ImportFrom(path, dir, mode)
	}
	if v.variant != nil {
		if path == v.variant.Path() {
			return v.variant, nil
		}
		dep, err := l.dependsOn(path, v.variant.Path())
		if err != nil {
			return nil, err
		}
		if !dep {
			return l.base.ImportFrom(path, dir, mode)
		}
	}
	if p, ok := v.pkgs[path]; ok {
		return p, nil
	}
	bp, err := build.Default.ImportDir(pkgDir, 0)
	if err != nil {
		return nil, err
	}
	p, _, err := l.check(path, bp.Dir, bp.GoFiles, v)
	if err != nil {
		return nil, err
	}
	v.pkgs[path] = p
	return p, nil
}

// dir returns the directory of a module package; false for a path outside
// the module.
func (l *loader) dir(path string) (string, bool) {
	rel, ok := strings.CutPrefix(path, l.modPath)
	if !ok || (rel != "" && rel[0] != '/') {
		return "", false
	}
	return filepath.Join(l.root, filepath.FromSlash(rel)), true
}

// dependsOn reports whether the module package path imports target,
// directly or through other module packages.
func (l *loader) dependsOn(path, target string) (bool, error) {
	imps, ok := l.imports[path]
	if !ok {
		dir, _ := l.dir(path)
		bp, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			return false, err
		}
		for _, imp := range bp.Imports {
			if _, ok := l.dir(imp); ok {
				imps = append(imps, imp)
			}
		}
		l.imports[path] = imps
	}
	for _, imp := range imps {
		if imp == target {
			return true, nil
		}
		if dep, err := l.dependsOn(imp, target); dep || err != nil {
			return dep, err
		}
	}
	return false, nil
}

// checkedFile is a parsed test file and the types of its package.
type checkedFile struct {
	file *ast.File
	info *types.Info
}

// check parses and type-checks the named files of dir as the package
// path, importing through imp.
func (l *loader) check(path, dir string, names []string, imp types.ImporterFrom) (*types.Package, []checkedFile, error) {
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	info := newInfo()
	conf := types.Config{Importer: imp}
	p, err := conf.Check(path, l.fset, files, info)
	if err != nil {
		return nil, nil, fmt.Errorf("type-check %s: %w", path, err)
	}
	out := make([]checkedFile, len(files))
	for i, f := range files {
		out[i] = checkedFile{f, info}
	}
	return p, out, nil
}

// checkTests type-checks the test files of dir (the package with its
// internal tests, and its external test package against that) and returns
// the test files.
func (l *loader) checkTests(dir string) ([]checkedFile, error) {
	bp, err := build.Default.ImportDir(dir, 0)
	if _, ok := err.(*build.NoGoError); ok || (err == nil && len(bp.TestGoFiles)+len(bp.XTestGoFiles) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(l.root, dir)
	if err != nil {
		return nil, err
	}
	path := l.modPath
	if rel != "." {
		path += "/" + filepath.ToSlash(rel)
	}
	var out []checkedFile
	p, files, err := l.check(path, dir, append(slices.Clone(bp.GoFiles), bp.TestGoFiles...), l.base)
	if err != nil {
		return nil, err
	}
	out = append(out, files[len(bp.GoFiles):]...)
	if len(bp.XTestGoFiles) > 0 {
		xv := &view{l: l, variant: p, pkgs: map[string]*types.Package{}}
		_, files, err := l.check(path+"_test", dir, bp.XTestGoFiles, xv)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

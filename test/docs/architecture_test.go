package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const modulePath = "github.com/canopy-dev/canopy"

// pkgInfo is what one package directory of the module declares, from its
// non-test files.
type pkgInfo struct {
	dir   string          // relative to the module root, slash-separated
	names map[string]bool // package clauses seen (one, normally)
	top   map[string]bool // top-level funcs, types, vars and consts
	// members holds, per type name, its methods (value and pointer
	// receivers), struct fields and interface methods.
	members map[string]map[string]bool
}

// module is the parsed source of this module.
type module struct {
	root   string
	pkgs   map[string]*pkgInfo   // by directory
	byName map[string][]*pkgInfo // by package name
	// topDirs are the first elements of every package directory: the
	// folders a path must start with to be checked.
	topDirs map[string]bool
}

// findRoot walks up from the working directory to this module's go.mod.
func findRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && regexp.MustCompile(`(?m)^module\s+`+regexp.QuoteMeta(modulePath)+`\s*$`).Match(data) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// loadModule parses every non-test Go file of the module (not of nested
// modules, testdata or hidden folders).
func loadModule(t *testing.T) *module {
	t.Helper()
	m := &module{root: findRoot(t), pkgs: map[string]*pkgInfo{}, byName: map[string][]*pkgInfo{}, topDirs: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(m.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != m.root {
				if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		rel, err := filepath.Rel(m.root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := m.pkgs[rel]
		if p == nil {
			p = &pkgInfo{dir: rel, names: map[string]bool{}, top: map[string]bool{}, members: map[string]map[string]bool{}}
			m.pkgs[rel] = p
		}
		p.names[f.Name.Name] = true
		p.add(f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.pkgs {
		for n := range p.names {
			m.byName[n] = append(m.byName[n], p)
		}
		if p.dir != "." {
			m.topDirs[strings.SplitN(p.dir, "/", 2)[0]] = true
		}
	}
	if len(m.pkgs) < 10 {
		t.Fatalf("found only %d packages under %s: the walk is broken", len(m.pkgs), m.root)
	}
	return m
}

func (p *pkgInfo) member(typ, name string) {
	if p.members[typ] == nil {
		p.members[typ] = map[string]bool{}
	}
	p.members[typ][name] = true
}

// add records f's top-level declarations.
func (p *pkgInfo) add(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.top[d.Name.Name] = true
				continue
			}
			if typ := receiverType(d.Recv.List[0].Type); typ != "" {
				p.member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					p.top[s.Name.Name] = true
					p.typeMembers(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.top[n.Name] = true
					}
				}
			}
		}
	}
}

// typeMembers records the fields of a struct type and the methods of an
// interface type.
func (p *pkgInfo) typeMembers(typ string, expr ast.Expr) {
	var list *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return
	}
	for _, fld := range list.List {
		if len(fld.Names) == 0 { // embedded: its type's name
			if n := receiverType(fld.Type); n != "" {
				p.member(typ, n)
			}
			continue
		}
		for _, n := range fld.Names {
			p.member(typ, n.Name)
		}
	}
}

// receiverType names the type of a receiver (or an embedded field):
// T, *T, T[K], pkg.T.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// A citation is a code span of a document that names code.
type citation struct {
	text string // the span as written
	line int
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the inline code spans of a Markdown document, outside
// fenced blocks, with their line numbers.
func codeSpans(doc string) []citation {
	var out []citation
	fenced := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			out = append(out, citation{text: strings.TrimSpace(m[1]), line: i + 1})
		}
	}
	return out
}

var (
	// `pkg.Name`, `pkg.Type.Member`, `dir/pkg.Name`, with an optional
	// "()".
	identRe = regexp.MustCompile(`^((?:[a-z0-9_]+/)*)([a-z][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(\))?$`)
	// `dir/dir/...`, `dir/file.go`, `dir/`
	pathRe = regexp.MustCompile(`^[a-z0-9_]+(?:/[A-Za-z0-9_.-]+)+/?$`)
)

// kind of a resolved citation.
const (
	kindNone = iota
	kindIdent
	kindPath
)

// resolve checks one code span: kindNone when it does not look like code
// of this module, otherwise its kind and, when it names nothing that
// exists, why.
func (m *module) resolve(s string) (kind int, problem string) {
	if sm := identRe.FindStringSubmatch(s); sm != nil && !strings.HasSuffix(s, ".go") {
		dir, pkg, name, member := strings.TrimSuffix(sm[1], "/"), sm[2], sm[3], sm[4]
		var cands []*pkgInfo
		if dir != "" {
			if !m.topDirs[strings.SplitN(dir, "/", 2)[0]] {
				return kindNone, ""
			}
			p := m.pkgs[dir+"/"+pkg]
			if p == nil {
				return kindIdent, fmt.Sprintf("no package in directory %s/%s", dir, pkg)
			}
			cands = []*pkgInfo{p}
		} else {
			cands = m.byName[pkg]
			if len(cands) == 0 {
				return kindIdent, fmt.Sprintf("no package named %q in the module", pkg)
			}
		}
		for _, p := range cands {
			if member == "" && p.top[name] {
				return kindIdent, ""
			}
			if member != "" && p.top[name] && p.members[name][member] {
				return kindIdent, ""
			}
		}
		dirs := make([]string, len(cands))
		for i, p := range cands {
			dirs[i] = p.dir
		}
		if member == "" {
			return kindIdent, fmt.Sprintf("%s is not declared in %s", name, strings.Join(dirs, ", "))
		}
		return kindIdent, fmt.Sprintf("%s.%s is not a method, field or interface method declared in %s", name, member, strings.Join(dirs, ", "))
	}
	if pathRe.MatchString(s) {
		if !m.topDirs[strings.SplitN(s, "/", 2)[0]] {
			return kindNone, ""
		}
		if _, err := os.Stat(filepath.Join(m.root, filepath.FromSlash(strings.TrimSuffix(s, "/")))); err != nil {
			return kindPath, "no such file or directory in the module"
		}
		return kindPath, ""
	}
	return kindNone, ""
}

func readDoc(t *testing.T, m *module, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(m.root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestArchitectureNamesExist resolves every identifier and path that
// docs/architecture.md cites.
func TestArchitectureNamesExist(t *testing.T) {
	m := loadModule(t)
	const doc = "docs/architecture.md"
	idents, paths := 0, 0
	for _, c := range codeSpans(readDoc(t, m, doc)) {
		kind, problem := m.resolve(c.text)
		switch kind {
		case kindIdent:
			idents++
		case kindPath:
			paths++
		}
		if problem != "" {
			t.Errorf("%s:%d: `%s`: %s", doc, c.line, c.text, problem)
		}
	}
	// A document that cites little, or a pattern that stopped matching,
	// must not pass quietly.
	if idents < 40 || paths < 20 {
		t.Errorf("%s cites %d identifiers and %d paths; expected at least 40 and 20", doc, idents, paths)
	}
	t.Logf("%s: %d identifiers and %d paths resolved", doc, idents, paths)
}

// TestArchitectureListsEveryPackage checks that docs/architecture.md names
// every package of the module by its directory.
func TestArchitectureListsEveryPackage(t *testing.T) {
	m := loadModule(t)
	cited := map[string]bool{}
	for _, c := range codeSpans(readDoc(t, m, "docs/architecture.md")) {
		cited[strings.TrimSuffix(c.text, "/")] = true
	}
	var missing []string
	for dir := range m.pkgs {
		if dir != "." && !cited[dir] {
			missing = append(missing, dir)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md does not say what these packages own (cite each as `dir`): %s", strings.Join(missing, ", "))
	}
}

// TestReadmeLayoutPathsExist checks the folders and files README.md cites
// in backticks (its layout table among them).
func TestReadmeLayoutPathsExist(t *testing.T) {
	m := loadModule(t)
	paths := 0
	for _, c := range codeSpans(readDoc(t, m, "README.md")) {
		for _, part := range strings.Split(c.text, ",") { // `topology/status`, `topology/reports`
			kind, problem := m.resolve(strings.TrimSpace(part))
			if kind == kindPath {
				paths++
			}
			if kind == kindPath && problem != "" {
				t.Errorf("README.md:%d: `%s`: %s", c.line, strings.TrimSpace(part), problem)
			}
		}
	}
	if paths < 10 {
		t.Errorf("README.md cites %d module paths; expected its layout table's", paths)
	}
}

// TestResolve checks the checker: names that exist pass, names that do
// not fail, and what is not code is left alone.
func TestResolve(t *testing.T) {
	m := loadModule(t)
	for _, tc := range []struct {
		span    string
		kind    int
		resolve bool
	}{
		{"store.Store.Txn", kindIdent, true},
		{"store.Store.Txn()", kindIdent, true},
		{"store.Options.Addresses", kindIdent, true}, // a struct field
		{"store.Log.Propose", kindIdent, true},       // an interface method
		{"store.New", kindIdent, true},
		{"relay/store.Store", kindIdent, true},
		{"store.Store.NoSuchMethod", kindIdent, false},
		{"store.NoSuchName", kindIdent, false},
		{"nosuchpackage.Name", kindIdent, false},
		{"relay/nosuch.Name", kindIdent, false},
		{"relay/store", kindPath, true},
		{"relay/store/store.go", kindPath, true},
		{"relay/nosuch", kindPath, false},
		{"relay/store/nosuch.go", kindPath, false},
		{"kubectl apply", kindNone, true},
		{"--role=root", kindNone, true},
		{"edge.canopy.dev/v1alpha1", kindNone, true},
		{"docs/tree-protocol.md", kindNone, true},
		{"reports-<child>", kindNone, true},
	} {
		kind, problem := m.resolve(tc.span)
		if kind != tc.kind || (problem == "") != tc.resolve {
			t.Errorf("resolve(%q) = kind %d, problem %q; want kind %d, resolves %v", tc.span, kind, problem, tc.kind, tc.resolve)
		}
	}
	spans := codeSpans("a `x.Y` b\n```\n`in.Fence`\n```\n`z.W` and `v`")
	var got []string
	for _, c := range spans {
		got = append(got, fmt.Sprintf("%d:%s", c.line, c.text))
	}
	if want := []string{"1:x.Y", "5:z.W", "5:v"}; !slices.Equal(got, want) {
		t.Errorf("codeSpans = %v, want %v", got, want)
	}
}

// Package docs holds the project's contract in prose, and this test, which
// keeps the prose pointing at code that exists.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, one directory up.
const root = ".."

// TestReadmeMapIsTrue follows README's "Where to look" table as a
// newcomer would: every file or folder a cell names exists, every
// function, type or method named after it is declared there, and every
// route is in web/routes.go. A rename that forgets the map fails here.
func TestReadmeMapIsTrue(t *testing.T) {
	t.Parallel()
	rows := mapRows(t, readFile(t, "README.md"))
	if len(rows) < 5 {
		t.Fatalf("README's map has %d rows; want at least the five: a callback, a job, a console page, a refund, adding a gateway", len(rows))
	}
	routes := readFile(t, "web/routes.go")
	for _, row := range rows {
		for _, cell := range row[1:] {
			place := "" // the file or folder the names after it live in
			for _, tok := range backticked(cell) {
				switch {
				case isRoute(tok):
					path := strings.Fields(tok)[1]
					if !strings.Contains(routes, `"`+path+`"`) {
						t.Errorf("%s: route %q is not in web/routes.go", row[0], tok)
					}
				case isPath(tok):
					place = tok
					if _, err := os.Stat(filepath.Join(root, tok)); err != nil {
						t.Errorf("%s: %s does not exist", row[0], tok)
					}
				case isName(tok):
					if place == "" {
						t.Errorf("%s: %q is named before any file or folder", row[0], tok)
						continue
					}
					if !declared(t, place, strings.TrimSuffix(tok, "()")) {
						t.Errorf("%s: %s is not declared in %s", row[0], tok, place)
					}
				}
			}
		}
	}
}

// TestReadmeMapCallsAreTrue follows the arrows of README's map: in each
// row, a route → its handler is registered in web/routes.go with that
// handler, and a function → a name has a call of that name in its body
// (or, for `→ … →`, in the body of one of the unexported functions of its
// package it calls, and so on). After an arrow, names listed with only a
// comma between them are called by the same function. A map whose hop
// names a function that is not called there fails here.
func TestReadmeMapCallsAreTrue(t *testing.T) {
	t.Parallel()
	routes := readFile(t, "web/routes.go")
	for _, row := range mapRows(t, readFile(t, "README.md")) {
		for _, c := range mapCalls(row) {
			switch {
			case isRoute(c.from.name):
				method, path, _ := strings.Cut(c.from.name, " ")
				_, handler, _ := strings.Cut(c.to.name, ".")
				reg := regexp.MustCompile(`e\.` + method + `\("` + regexp.QuoteMeta(path) + `", s\.` + regexp.QuoteMeta(handler) + `\b`)
				if !reg.MatchString(routes) {
					t.Errorf("%s: web/routes.go does not route %s to %s", row[0], c.from.name, c.to.name)
				}
			case !calls(t, c.from, c.to.name, c.through):
				how := "→"
				if c.through {
					how = "→ … →"
				}
				t.Errorf("%s: %s (%s) %s %s: no such call", row[0], c.from.name, c.from.place, how, c.to.name)
			}
		}
	}
}

// TestReadmeMapRowsAreShort: a row of README's map opens at most
// maxOpened files or folders (its tests aside), each counted once, so
// that following it stays a few minutes' reading.
func TestReadmeMapRowsAreShort(t *testing.T) {
	t.Parallel()
	const maxOpened = 5
	for _, row := range mapRows(t, readFile(t, "README.md")) {
		opened := map[string]bool{}
		for _, cell := range row[1 : len(row)-1] {
			for _, tok := range backticked(cell) {
				if isPath(tok) && !isRoute(tok) {
					opened[tok] = true
				}
			}
		}
		if len(opened) > maxOpened {
			t.Errorf("%s opens %d files or folders; want at most %d", row[0], len(opened), maxOpened)
		}
	}
}

// named is a name the map gives, with the file or folder named before it.
type named struct{ place, name string }

// call is one arrow of the map: from calls to, directly or (through)
// by way of its package's unexported functions.
type call struct {
	from, to named
	through  bool
}

// mapCalls are the arrows of a row's cells but the first (what to
// follow) and the last (its tests).
func mapCalls(row []string) []call {
	var out []call
	if len(row) < 3 {
		return out
	}
	for _, cell := range row[1 : len(row)-1] {
		var (
			prev, caller named
			have, group  bool
			through      bool
			place        string
			last         int
		)
		for _, m := range tick.FindAllStringSubmatchIndex(cell, -1) {
			tok := cell[m[2]:m[3]]
			if isPath(tok) && !isRoute(tok) {
				place = tok
				continue
			}
			if !isRoute(tok) && !isName(tok) {
				continue
			}
			between := cell[last:m[0]] // files named in it included
			last = m[1]
			n := named{place, strings.TrimSuffix(tok, "()")}
			if isRoute(tok) {
				n.name = tok
			}
			sep := strings.NewReplacer(" ", "", ":", "").Replace(tick.ReplaceAllString(between, ""))
			switch {
			case have && strings.Contains(sep, "→"):
				caller, group = prev, true
				through = strings.Contains(sep, "…")
				out = append(out, call{caller, n, through})
			case group && sep == ",":
				out = append(out, call{caller, n, through})
			default:
				group = false
			}
			prev, have = n, true
		}
	}
	return out
}

// calls says whether function or method from (Type.Method) has in its
// body a call of name (the last part of Type.Method), or, with through,
// has one in an unexported function of its package that it calls.
func calls(t *testing.T, from named, name string, through bool) bool {
	t.Helper()
	_, want := cutLast(name)
	decls := funcDecls(t, from.place)
	typ, fn, isMethod := strings.Cut(from.name, ".")
	var start *ast.FuncDecl
	for _, d := range decls[funcName(from.name)] {
		if !isMethod && d.Recv == nil || isMethod && d.Recv != nil && receiver(d) == typ && d.Name.Name == fn {
			start = d
		}
	}
	if start == nil {
		t.Errorf("%s is not a function of %s", from.name, from.place)
		return false
	}
	seen := map[*ast.FuncDecl]bool{}
	queue := []*ast.FuncDecl{start}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] || d.Body == nil {
			continue
		}
		seen[d] = true
		found := false
		ast.Inspect(d.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			called := ""
			switch f := c.Fun.(type) {
			case *ast.Ident:
				called = f.Name
			case *ast.SelectorExpr:
				called = f.Sel.Name
			}
			if called == want {
				found = true
			} else if through && called != "" && !ast.IsExported(called) {
				queue = append(queue, decls[called]...)
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// funcDecls are the function and method declarations of the package of
// place (a Go file's folder, or the folder itself), by name, tests aside.
func funcDecls(t *testing.T, place string) map[string][]*ast.FuncDecl {
	t.Helper()
	dir := filepath.Join(root, place)
	if strings.HasSuffix(place, ".go") {
		dir = filepath.Dir(dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*ast.FuncDecl{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				out[fd.Name.Name] = append(out[fd.Name.Name], fd)
			}
		}
	}
	return out
}

// funcName is the function's own name: Method of Type.Method.
func funcName(name string) string {
	_, n := cutLast(name)
	return n
}

func cutLast(name string) (string, string) {
	if i := strings.LastIndex(name, "."); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// TestDocLinksResolve checks that every relative link in README.md and
// docs/*.md names a file or folder of the repository.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "loadtest", "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prose := code.ReplaceAllString(string(text), "") // a link inside code is code
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mapRows are the rows of the table that follows "Where to look", each
// split into its cells.
func mapRows(t *testing.T, readme string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "Where to look")
	if !ok {
		t.Fatal(`README.md has no "Where to look" table`)
	}
	var rows [][]string
	started := false
	for _, line := range strings.Split(after, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") || cells[0] == "to follow" {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

var tick = regexp.MustCompile("`([^`]+)`")

func backticked(cell string) []string {
	var out []string
	for _, m := range tick.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

var (
	routeRE = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) /\S*$`)
	nameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?(\(\))?$`)
)

func isRoute(tok string) bool { return routeRE.MatchString(tok) }

// isPath: a token with a slash or a file's extension.
func isPath(tok string) bool {
	return !strings.Contains(tok, " ") && (strings.Contains(tok, "/") || regexp.MustCompile(`\.(go|templ|md|sql)$`).MatchString(tok))
}

func isName(tok string) bool { return nameRE.MatchString(tok) }

// declared says whether name — a function, type, method (Type.Method),
// variable or constant — is declared in the Go file place, or in one of
// the Go files of the folder place; a templ component in a .templ file.
func declared(t *testing.T, place, name string) bool {
	t.Helper()
	path := filepath.Join(root, place)
	var files []string
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.go"))
	} else if strings.HasSuffix(place, ".go") {
		files = []string{path}
	} else {
		// a .templ file: its components are declared as templ Name(…)
		b, err := os.ReadFile(path)
		return err == nil && regexp.MustCompile(`(?m)^templ `+regexp.QuoteMeta(name)+`\(`).Match(b)
	}
	typ, method, isMethod := strings.Cut(name, ".")
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if isMethod && d.Recv != nil && d.Name.Name == method && receiver(d) == typ {
					return true
				}
				if !isMethod && d.Recv == nil && d.Name.Name == name {
					return true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !isMethod && s.Name.Name == name {
							return true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !isMethod && n.Name == name {
								return true
							}
						}
					}
				}
			}
		}
	}
	return false
}

// receiver is the type name a method is declared on.
func receiver(d *ast.FuncDecl) string {
	x := d.Recv.List[0].Type
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	if ix, ok := x.(*ast.IndexExpr); ok {
		x = ix.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

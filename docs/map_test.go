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

package gateways_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways"
)

// namingAllowed are the files outside the gateways' own packages that
// may name a paid gateway: the registry, which imports each with one
// line, the deletion proof, which deletes one by name, and this file,
// whose list names files named after one. Each of the others below still names one in its comments or tests, and leaves
// this list when it no longer does (the test fails while it stays).
// docs/ is the gateways' tables; loadtest/ is a module of its own,
// checked by its own tests.
var namingAllowed = []string{
	"app/gateways/gateways.go",
	"app/gateways/deletion_test.go",
	"app/gateways/names_test.go",

	"app/audit/books_app_test.go",
	"app/audit/books_model_test.go",
	"app/audit/books_test.go",
	"app/janitor/janitor_test.go",
	"cmd/sekali/catchup_test.go",
	"cmd/sekali/janitor_browser_test.go",
	"cmd/sekali/midtrans_test.go",
	"cmd/sekali/payment_kill_test.go",
	"cmd/sekali/refund_kill_test.go",
	"web/console_helpers_test.go",
	"web/sandbox_test.go",
}

// Outside its own package, no Go file, template or script names a paid
// gateway of the registry (but the files of namingAllowed): a fork that
// drops a gateway drops its package and its line in All, and nothing
// else names it.
func TestNoGatewayNamedOutsideItsPackage(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	for _, name := range gateways.Names() {
		own[filepath.Join("app", "gateways", name)] = true
	}
	for _, name := range gatewaysOnDisk(t, root) {
		if !own[filepath.Join("app", "gateways", name)] {
			// The deletion proof runs this test with a gateway deleted
			// by an overlay the files read here do not see.
			t.Skipf("the gateway package %s is on disk but not in the registry: the tree built is not the one on disk", name)
		}
	}
	var naming []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if own[rel] || rel == "docs" || rel == "loadtest" || rel == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".templ", ".js":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := strings.ToLower(string(b))
		for _, name := range gateways.Paid() {
			if strings.Contains(text, name) {
				naming = append(naming, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range naming {
		if !slices.Contains(namingAllowed, f) {
			t.Errorf("%s names a paid gateway: name it in its own package and reach it through the registry", f)
		}
	}
	for _, f := range namingAllowed {
		if !slices.Contains(naming, f) {
			t.Errorf("%s names no paid gateway any more: take it off namingAllowed", f)
		}
	}
}

// gatewaysOnDisk are the directories under app/gateways that hold a
// gateway's package: one whose non-test files declare its Name as the
// directory's name.
func gatewaysOnDisk(t *testing.T, root string) []string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(root, "app", "gateways"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(root, "app", "gateways", d.Name(), "*.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && !strings.HasSuffix(f, "_test.go") && strings.Contains(string(b), "const Name = \""+d.Name()+"\"") {
				names = append(names, d.Name())
				break
			}
		}
	}
	return names
}

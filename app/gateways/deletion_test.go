package gateways_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/testenv"
)

// deleted is the gateway TestDeletingAGateway deletes: Xendit, whose
// package holds all of it (its emulation too), so that deleting it is
// the whole of the promise. Any gateway but the sandbox would do once it
// is whole too.
const deleted = "xendit"

// TestDeletingAGateway proves what docs/callbacks.md#adding-a-gateway
// promises: a gateway is one package under app/gateways and one line in
// gateways.All, and deleting both leaves a tree that builds, vets and
// passes the tests of the remaining gateways.
//
// It deletes Xendit without touching the tree: the go command's -overlay
// flag replaces every file of app/gateways/xendit with nothing and
// app/gateways/gateways.go with a copy that lacks the gateway's import
// and its element of All (a copy that still named it anywhere else would
// fail here: the registry must name a gateway in those two places only).
// Packages that do not depend on the registry keep their build cache;
// the go commands take make test's -race so that they share its cache.
// Under the deletion it runs go build ./... and go vet ./... (which
// compiles every package's tests too) in both modules (the app's and the
// QA rig's, loadtest/), and go list ./..., then go test of
// ./app/gateways/...: the remaining gateways, the registry and the
// conformance checks. It proves the deletion, not the whole suite again:
// the tests of the packages that use the registry run once, in make
// test, over every gateway. Test results are go test's cached ones where
// a package's test binary is unchanged since the last run of this test:
// make test itself runs every test fresh.
//
// So that it cannot pass because the overlay was ignored, it checks that
// go list no longer lists the package, that a probe (one more file of the
// registry's package, importing the deleted one) fails to build, vet and
// test under the deletion and does all three without it, and that the
// registry the nested tests see has no such gateway (a test the overlay
// adds, which must run and pass).
//
// It lives beside the registry whose promise it proves; the overlay
// deletes this file too, so the go test of app/gateways it starts does
// not start it again. It fails until every file that imports the deleted
// package is in that package (it lists them).
func TestDeletingAGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and tests the tree again without a gateway: make test runs it")
	}
	t.Parallel()
	start := time.Now()
	root := moduleRoot(t)
	module := modulePath(t, root)
	deletedPath := module + "/app/gateways/" + deleted
	registry := module + "/app/gateways"
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), testenv.Budget(t))
	defer cancel()
	if _, ok := gateways.Find(deleted); !ok {
		t.Fatalf("%s is not in gateways.All: nothing to delete", deleted)
	}
	pkgDir := filepath.Join(root, "app", "gateways", deleted)
	registryFile := filepath.Join(root, "app", "gateways", "gateways.go")

	// The files that still import the deleted package from outside it:
	// each breaks the build or vet under the deletion.
	if importers := importersOf(t, root, deletedPath, pkgDir, registryFile); len(importers) > 0 {
		t.Errorf("these files import %s from outside it, so deleting it breaks them:\n  %s", deletedPath, strings.Join(importers, "\n  "))
	}

	// The overlay: the package's files deleted, the registry rewritten,
	// this test deleted, and a test of the registry added.
	replace := map[string]string{}
	err := filepath.WalkDir(pkgDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			replace[path] = ""
		}
		return err
	})
	if err != nil || len(replace) == 0 {
		t.Fatalf("the files of %s: %v (%d files)", pkgDir, err, len(replace))
	}
	src, err := os.ReadFile(registryFile)
	if err != nil {
		t.Fatal(err)
	}
	rewritten, err := withoutGateway(src, deletedPath)
	if err != nil {
		t.Fatalf("gateways.go without %s: %v", deleted, err)
	}
	replace[registryFile] = writeFile(t, dir, "gateways.go", rewritten)
	replace[filepath.Join(root, "app", "gateways", "deletion_test.go")] = ""
	replace[filepath.Join(root, "app", "gateways", "zz_deleted_test.go")] = writeFile(t, dir, "zz_deleted_test.go", []byte(fmt.Sprintf(goneTest, registry, deleted, len(gateways.All)-1)))
	overlay := writeOverlay(t, dir, "overlay.json", replace)
	t.Logf("the overlay deletes %d files of %s and rewrites gateways.go (%s)", len(replace)-3, pkgDir, overlay)

	goCmd := func(name string, args ...string) (string, error) {
		t.Helper()
		began := time.Now()
		out, err := command(ctx, root, args...).CombinedOutput()
		t.Logf("%s: go %s (%s)", name, strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
		return string(out), err
	}

	// Without the package, the rest builds and vets: the app's module and
	// the QA rig's (loadtest/, a module of its own that uses the app's
	// packages through a replace, so the overlay's paths reach them).
	for _, mod := range []string{".", "loadtest"} {
		if out, err := goCmd("build", "-C", mod, "build", "-race", "-overlay", overlay, "./..."); err != nil {
			t.Errorf("go -C %s build ./... without %s: %v\n%s", mod, deleted, err, out)
		}
		if out, err := goCmd("vet", "-C", mod, "vet", "-race", "-overlay", overlay, "./..."); err != nil {
			t.Errorf("go -C %s vet ./... without %s: %v\n%s", mod, deleted, err, out)
		}
	}

	// go list no longer lists the package (and does without the overlay).
	listed := func(args ...string) []string {
		out, err := goCmd("list", append([]string{"list", "-e"}, append(args, "./...")...)...)
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return strings.Fields(out)
	}
	if !slices.Contains(listed(), deletedPath) {
		t.Fatalf("go list ./... does not list %s even before the deletion", deletedPath)
	}
	if slices.Contains(listed("-overlay", overlay), deletedPath) {
		t.Errorf("go list -overlay ./... still lists %s: the overlay does not delete it", deletedPath)
	}

	// A probe, a file of the registry's package that imports the deleted
	// one itself (as a file the deletion forgot would), builds, vets and
	// tests without the deletion, and fails each under it, for want of
	// the package. (The registry's package, because a package only the
	// overlay holds cannot be vetted: vet runs in its directory.)
	probeFile := filepath.Join(root, "app", "gateways", "zz_deletion_probe.go")
	probe := writeFile(t, dir, "probe.go", []byte("package gateways\n\nimport _ \""+deletedPath+"\"\n"))
	control := writeOverlay(t, dir, "control.json", map[string]string{probeFile: probe})
	withProbe := map[string]string{probeFile: probe}
	for k, v := range replace {
		withProbe[k] = v
	}
	probed := writeOverlay(t, dir, "probed.json", withProbe)
	for _, verb := range [][]string{{"build", "-race"}, {"vet", "-race"}, {"test", "-race", "-run", "^$"}} {
		args := append(slices.Clone(verb), "-overlay", control, "./app/gateways")
		if out, err := goCmd("probe", args...); err != nil {
			t.Errorf("go %s of a package importing %s, before the deletion: %v\n%s", verb[0], deleted, err, out)
		}
		args = append(slices.Clone(verb), "-overlay", probed, "./app/gateways")
		if out, err := goCmd("probe", args...); err == nil || !strings.Contains(out, deletedPath) {
			t.Errorf("go %s of a package importing %s, after the deletion: %v, want a failure naming %s\n%s", verb[0], deleted, err, deletedPath, out)
		}
	}

	// The tests of the remaining gateways and of the registry.
	pkgs := []string{"./app/gateways/..."}
	t.Logf("testing under the deletion: %s", strings.Join(pkgs, " "))
	runTests(t, ctx, root, overlay, registry, pkgs)
	t.Logf("deleting %s: %s in all", deleted, time.Since(start).Round(time.Second))
}

// goneTest is the test the overlay adds to app/gateways: the registry its
// tests see lacks the deleted gateway.
const goneTest = `package gateways_test

import (
	"testing"

	"%s"
)

func TestTheDeletedGatewayIsGone(t *testing.T) {
	if _, ok := gateways.Find(%q); ok || len(gateways.All) != %d {
		t.Fatalf("gateways.All still has it, or not one fewer: %%v", gateways.Names())
	}
}
`

// withoutGateway is the registry's source src without the import of
// pkgPath and the elements of All that name it; an error when either is
// not exactly one, or the source names the package anywhere else.
func withoutGateway(src []byte, pkgPath string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "gateways.go", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	name := pkgPath[strings.LastIndex(pkgPath, "/")+1:]
	type span struct{ from, to int } // byte offsets of whole lines
	var cut []span
	lines := func(n ast.Node) span {
		from := fset.Position(n.Pos()).Offset
		to := fset.Position(n.End()).Offset
		for from > 0 && src[from-1] != '\n' {
			from--
		}
		for to < len(src) && src[to] != '\n' {
			to++
		}
		return span{from, min(to+1, len(src))}
	}
	imports := 0
	for _, spec := range f.Imports {
		if p, _ := strconv.Unquote(spec.Path.Value); p == pkgPath {
			if spec.Name != nil {
				name = spec.Name.Name
			}
			cut = append(cut, lines(spec))
			imports++
		}
	}
	elements := 0
	var all *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok && len(v.Names) == 1 && v.Names[0].Name == "All" && len(v.Values) == 1 {
			all, _ = v.Values[0].(*ast.CompositeLit)
		}
		return all == nil
	})
	if all == nil {
		return nil, fmt.Errorf("no var All = []Entry{…}")
	}
	for _, elt := range all.Elts {
		if names(elt, name) {
			cut = append(cut, lines(elt))
			elements++
		}
	}
	if imports != 1 || elements != 1 {
		return nil, fmt.Errorf("%d imports of %s and %d elements of All naming it, want one of each", imports, pkgPath, elements)
	}
	slices.SortFunc(cut, func(a, b span) int { return b.from - a.from })
	out := slices.Clone(src)
	for _, c := range cut {
		out = append(out[:c.from], out[c.to:]...)
	}
	g, err := parser.ParseFile(token.NewFileSet(), "gateways.go", out, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if names(g, name) {
		return nil, fmt.Errorf("it names %s beyond its import and its line in All", name)
	}
	return format.Source(out)
}

// names says whether n refers to the package imported as name.
func names(n ast.Node, name string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// importersOf lists the Go files of the module at root that import
// pkgPath, relative to root: but those in the directory skip (the
// package itself) and the file registry (whose import the overlay drops).
func importersOf(t *testing.T, root, pkgPath, skip, registry string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == skip || path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || path == registry:
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not Go this test can read: the build says so
		}
		for _, spec := range f.Imports {
			if p, _ := strconv.Unquote(spec.Path.Value); p == pkgPath {
				rel, _ := filepath.Rel(root, path)
				out = append(out, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testEvent is one line of go test -json.
type testEvent struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string // build-output, build-fail
}

// runTests runs go test -json of pkgs under the overlay and logs each
// package's result as it finishes, with the output of what failed; it
// fails t when anything failed, or when the test the overlay adds did not
// pass.
func runTests(t *testing.T, ctx context.Context, root, overlay, registry string, pkgs []string) {
	t.Helper()
	// The same -timeout as this test's (a value that changes from run
	// to run would make every result a new one, never cached); ctx ends
	// the run first if it comes to this test's deadline.
	timeout := "10m"
	if f := flag.Lookup("test.timeout"); f != nil {
		timeout = f.Value.String()
	}
	args := append([]string{"test", "-race", "-json", "-overlay", overlay, "-timeout", timeout}, pkgs...)
	cmd := command(ctx, root, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type key struct{ pkg, test string }
	logs := map[key]*strings.Builder{} // a test's output; a package's own under test ""; a build's under its import path
	logOf := func(k key) *strings.Builder {
		if logs[k] == nil {
			logs[k] = &strings.Builder{}
		}
		return logs[k]
	}
	failures := map[string]*strings.Builder{} // what failed of each package
	failureOf := func(pkg string) *strings.Builder {
		if failures[pkg] == nil {
			failures[pkg] = &strings.Builder{}
		}
		return failures[pkg]
	}
	var failed []string
	running := map[string]bool{} // started, not finished
	gone := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			logOf(key{}).WriteString(sc.Text() + "\n") // go test's own words: a package that does not load
			continue
		}
		switch {
		case e.Action == "build-output":
			logOf(key{pkg: e.ImportPath}).WriteString(e.Output)
		case e.Action == "build-fail":
			pkg, _, _ := strings.Cut(e.ImportPath, " ")
			failureOf(strings.TrimSuffix(pkg, "_test")).WriteString(logOf(key{pkg: e.ImportPath}).String())
		case e.Action == "output":
			logOf(key{e.Package, e.Test}).WriteString(e.Output)
		case e.Test != "":
			if e.Test == "TestTheDeletedGatewayIsGone" && e.Action == "pass" {
				gone = true
			}
			if e.Action == "fail" && !strings.Contains(e.Test, "/") { // a subtest's output is in its parent's
				failureOf(e.Package).WriteString(logOf(key{e.Package, e.Test}).String())
			}
		case e.Package == "":
		case e.Action == "start":
			running[e.Package] = true
		case e.Action == "pass" || e.Action == "skip":
			delete(running, e.Package)
			cached := ""
			if strings.Contains(logOf(key{pkg: e.Package}).String(), "(cached)") {
				cached = " (cached)"
			}
			t.Logf("ok   %s %.1fs%s", e.Package, e.Elapsed, cached)
		case e.Action == "fail":
			delete(running, e.Package)
			failed = append(failed, e.Package)
			failureOf(e.Package).WriteString(logOf(key{pkg: e.Package}).String())
			t.Logf("FAIL %s %.1fs", e.Package, e.Elapsed)
		}
	}
	err = cmd.Wait()
	t.Logf("go test under the deletion: %s", time.Since(began).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Errorf("go test under the deletion came to this test's deadline and was stopped; unfinished: %s", strings.Join(slices.Sorted(maps.Keys(running)), " "))
	} else if len(running) > 0 {
		t.Errorf("go test under the deletion ended with packages unfinished: %s", strings.Join(slices.Sorted(maps.Keys(running)), " "))
	}
	for _, p := range failed {
		t.Errorf("without %s, the tests of %s fail:\n%s", deleted, p, tail(failureOf(p).String(), 200))
	}
	if said := stderr.String() + logOf(key{}).String(); err != nil && (len(failed) == 0 || said != "") {
		t.Errorf("go test under the deletion: %v\n%s", err, said)
	}
	if !gone && !slices.Contains(failed, registry) {
		t.Errorf("the test the overlay adds to app/gateways did not pass: did go test see the overlay?")
	}
}

// command is the go command with args, run in dir; when ctx ends it is
// killed with the processes it started (a test binary, a vet).
func command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d lines before\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q, %v", gomod, err)
	}
	return filepath.Dir(gomod)
}

// modulePath is the module's path, from its go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeOverlay writes the go command's -overlay file: replace maps each
// file of the tree to the file that stands for it, "" for none.
func writeOverlay(t *testing.T, dir, name string, replace map[string]string) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"Replace": replace}, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, b)
}

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRenameACopy renames a copy of this checkout the way a fork would,
// three times, and proves that the result is a working tree:
//
//  1. To shop: a name shorter than the original (the generated templ
//     code, which records columns, must be regenerated) and a word the
//     tree already uses (the tool warns).
//  2. From shop to bigstore, a longer name, renamed from a word the tree
//     uses elsewhere ("Shopify" in an import path, "shops", "workshop"
//     must stay).
//  3. The README's own example, run as written (make rename
//     MODULE=github.com/acme/tokoku NAME=tokoku): no warning, since the
//     name is new to the tree (the example's own mention does not count).
//
// After 1 and 2 the text is checked, not built (the tool runs without
// -check). The README's example, last, builds and vets the tree as a
// fork's rename does (go build ./..., go vet ./...); then make generate
// must leave it as it is, and the tests of the packages that a rename can
// break without the compiler noticing run (affectedPackages). Each rename
// rewrites one name into another the same everywhere and leaves any
// damage of the renames before it in place, so the one build proves all
// three; a build of a renamed module compiles every package again, the
// bulk of this test's time, so it is done once.
//
// Why that is enough, and not the fork's whole suite: a rename rewrites
// text. Where the text is Go identifiers and import paths, a mistake
// fails go build or go vet. Where it is generated code, make generate
// shows it. What is left is text whose meaning the compiler cannot check:
// a string that must name the module (a go build of a package path, a
// test asserting import paths) and files a package embeds (the
// migrations, whose hash names the test template; the stylesheet); those
// packages' tests run, and web/views' write the debugging guide. Every
// other rewrite is of a whole word into another, the same everywhere:
// TestRewriteRules and its neighbours test the rules one by one, and
// checkLeftovers checks the whole tree for the old names. The behaviour
// the rest of the suite tests is this checkout's, unchanged by a rename.
//
// The copy holds the files git would commit: tracked ones and new ones
// that .gitignore does not exclude, as they are in the working tree. Its
// go commands share this machine's module and build caches and build as
// the other tests that run the go command do (no race detector, no
// -trimpath): the dependencies compiled for cmd/sekali's crash test and
// the chaos test, and the templ tool compiled for web/views' generate
// test, are not compiled again; only the renamed module's own packages
// are. The copy is always at the same path for this checkout (copyDir),
// since the build cache's keys hold it: a second run finds even those.
func TestRenameACopy(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a renamed copy of the tree: make test runs it")
	}
	root := strings.TrimSpace(gitOutput(t, ".", "rev-parse", "--show-toplevel"))
	dst := copyDir(t, root)
	n := copyTree(t, root, dst)
	t.Setenv("GOWORK", "off")
	oldModule, oldName, err := detect(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("copied %d files of %s (%s)", n, oldModule, oldName)

	// 1. To shop, a shorter name the tree already uses as a word.
	out := renameCopy(t, dst, "github.com/acme/shop", "shop")
	if !strings.Contains(out, `warning: "shop" already occurred`) {
		t.Errorf("renaming to shop, a word the tree uses, gave no warning:\n%s", out)
	}
	checkLeftovers(t, dst, oldModule, oldName)
	if b, err := os.ReadFile(filepath.Join(dst, "web/views/shop.templ")); err != nil || !bytes.Contains(b, []byte(`href="/">Shop</a>`)) || bytes.Contains(b, []byte("Shop shop")) {
		t.Errorf("the shop's brand is not \"Shop\" (%v)", err)
	}

	// 2. From shop to bigstore, a longer name: only whole words are shop.
	out = renameCopy(t, dst, "github.com/acme/bigstore", "bigstore")
	checkLeftovers(t, dst, "github.com/acme/shop", "shop")
	if b, err := os.ReadFile(filepath.Join(dst, "loadtest/go.mod")); err != nil || !bytes.Contains(b, []byte("github.com/Shopify/toxiproxy")) {
		t.Errorf("loadtest/go.mod lost github.com/Shopify/toxiproxy (%v)", err)
	}
	if strings.Contains(out, "warning:") {
		t.Errorf("bigstore does not occur in the tree, yet the rename warned:\n%s", out)
	}

	// 3. The README's example, as written: it builds and vets the tree.
	readme, err := os.ReadFile(filepath.Join(dst, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(make rename MODULE=(\\S+) NAME=([a-z0-9]+))`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `make rename MODULE=… NAME=…` example")
	}
	example, module, name := string(m[1]), string(m[2]), string(m[3])
	start := time.Now()
	cmd := exec.Command("bash", "-c", example)
	cmd.Dir = dst
	b, err := cmd.CombinedOutput()
	out = string(b)
	t.Logf("%s (%s):\n%s", example, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the README's example failed: %v", err)
	}
	if strings.Contains(out, "warning:") {
		t.Errorf("the README's example warned:\n%s", out)
	}
	checkRenamed(t, dst, out, "bigstore", module, name, true)
	checkLeftovers(t, dst, "github.com/acme/bigstore", "bigstore")
	checkGenerate(t, dst)
	testPackages(t, dst, module)
}

// affectedPackages lists, by module directory (the app's ".", the QA
// rig's "loadtest") and as directories relative to dir, the packages a
// rename of module can break where the compiler does not look: those
// whose Go files name the module in a string literal (not an import), and
// those that embed a file that names the module or the product (any
// spelling). web/views is always one: its tests check the generated code
// and write the debugging guide, which names the product.
func affectedPackages(t *testing.T, dir, module string) map[string][]string {
	t.Helper()
	_, name, err := detect(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{module, name, capitalize(name), strings.ToUpper(name)}
	mods, err := modules(dir)
	if err != nil {
		t.Fatal(err)
	}
	affected := map[string][]string{}
	for _, mod := range mods {
		if pkgs := affectedIn(t, dir, mod, module, names); len(pkgs) > 0 {
			affected[mod] = pkgs
		}
	}
	return affected
}

// affectedIn is affectedPackages in the module at dir/mod.
func affectedIn(t *testing.T, dir, mod, module string, names []string) []string {
	t.Helper()
	type pkg struct {
		Dir, ImportPath                                string
		GoFiles, TestGoFiles, XTestGoFiles, EmbedFiles []string
	}
	list := exec.Command("go", "list", "-json=Dir,ImportPath,GoFiles,TestGoFiles,XTestGoFiles,EmbedFiles", "./...")
	list.Dir = filepath.Join(dir, mod)
	b, err := list.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", mod, err)
	}
	set := map[string]bool{}
	if mod == "." {
		set["web/views"] = true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if rel == selfDir {
			continue // it would rename a copy of the copy
		}
		for _, f := range slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles) {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if namesInStrings(src, module) {
				set[rel] = true
			}
		}
		for _, f := range p.EmbedFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range names {
				if len(wordsAt(string(src), w)) > 0 {
					set[rel] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// namesInStrings reports whether a string literal of the Go source src,
// other than an import path, contains module as a whole word.
func namesInStrings(src []byte, module string) bool {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", fset.Base(), len(src)), src, nil, 0)
	inImport, parens := false, 0
	for {
		_, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return false
		case token.IMPORT:
			inImport = true
		case token.LPAREN:
			if inImport {
				parens++
			}
		case token.RPAREN:
			if inImport {
				if parens--; parens == 0 {
					inImport = false
				}
			}
		case token.SEMICOLON:
			if inImport && parens == 0 {
				inImport = false
			}
		case token.STRING:
			if !inImport && len(wordsAt(lit, module)) > 0 {
				return true
			}
		}
	}
}

// testPackages runs the tests of the packages of the tree dir, renamed to
// module, that affectedPackages lists.
func testPackages(t *testing.T, dir, module string) {
	t.Helper()
	for mod, pkgs := range affectedPackages(t, dir, module) {
		args := []string{"-C", mod, "test", "-count=1"}
		for _, p := range pkgs {
			rel, err := filepath.Rel(filepath.FromSlash(mod), filepath.FromSlash(p))
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, "./"+filepath.ToSlash(rel))
		}
		t.Logf("%s: the tests of %v", module, pkgs)
		goOutput(t, dir, args...)
	}
	// The copy's test databases have a prefix of their own (testenv's,
	// from the copy's path and the new name): its testclean drops them.
	goOutput(t, dir, "run", "./tools/testclean")
}

// checkGenerate runs make generate in dir and fails when it changes a
// file: the generated code and the debugging guide are the ones their
// sources give.
func checkGenerate(t *testing.T, dir string) {
	t.Helper()
	before := snapshot(t, dir)
	start := time.Now()
	cmd := exec.Command("make", "generate")
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	t.Logf("make generate in the copy (%s)", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("make generate: %v\n%s", err, b)
	}
	after := snapshot(t, dir)
	for f, sum := range after {
		if before[f] != sum {
			t.Errorf("make generate changed %s", f)
		}
	}
	for f := range before {
		if _, ok := after[f]; !ok {
			t.Errorf("make generate removed %s", f)
		}
	}
}

// snapshot maps each regular file under dir to a hash of its content.
func snapshot(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	sums := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		sums[full] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// copyDir is an empty directory for the copy of the checkout at root:
// the same path every time, one per checkout, removed when the test
// ends.
func copyDir(t *testing.T, root string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("rename-copy-%x", sum[:6]))
	if err := os.RemoveAll(dir); err != nil { // left by a run that was killed
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// renameCopy runs the tool on dst without -check (it regenerates the
// templ code; it does not build or vet) and checks what it says and did.
func renameCopy(t *testing.T, dst, module, name string) string {
	t.Helper()
	_, oldName, err := detect(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out bytes.Buffer
	err = run(options{Dir: dst, Module: module, Name: name}, &out)
	t.Logf("rename to %s (%s) (%s):\n%s", module, name, time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("rename: %v", err)
	}
	checkRenamed(t, dst, out.String(), oldName, module, name, false)
	// A second run with the same arguments is refused and changes nothing.
	var again bytes.Buffer
	err = run(options{Dir: dst, Module: module, Name: name}, &again)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "nothing to do") {
		t.Errorf("second run: err = %v, want a refusal (output: %s)", err, again.String())
	}
	return out.String()
}

// checkRenamed checks what a rename from oldName to module and name said
// (out) and did; checked says the tool built and vetted the tree.
func checkRenamed(t *testing.T, dst, out, oldName, module, name string, checked bool) {
	t.Helper()
	want := []string{"module path", "product name", "renamed cmd/" + oldName + " -> cmd/" + name, "templ generate"}
	if checked {
		want = append(want, "go -C . build ./...", "go -C . vet ./...", "go -C loadtest build ./...", "go -C loadtest vet ./...")
	}
	for _, want := range want {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not mention %q", want)
		}
	}
	if got, _, err := detect(dst, ""); err != nil || got != module {
		t.Errorf("go.mod module = %q (%v), want %q", got, err, module)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "loadtest/go.mod")); err != nil ||
		!bytes.Contains(b, []byte("module "+module+"/loadtest\n")) || !bytes.Contains(b, []byte("replace "+module+" => ../\n")) {
		t.Errorf("loadtest/go.mod does not name %s/loadtest and replace %s with ../ (%v):\n%s", module, module, err, b)
	}
	if _, err := os.Stat(filepath.Join(dst, "cmd", name, "main.go")); err != nil {
		t.Errorf("cmd/%s/main.go: %v", name, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "cmd", oldName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cmd/%s is still there (%v)", oldName, err)
	}
	title := capitalize(name)
	if b, err := os.ReadFile(filepath.Join(dst, "README.md")); err == nil && !bytes.Contains(b, []byte("# "+title)) {
		t.Errorf("README.md has no %q heading", "# "+title)
	}
}

// checkLeftovers looks for the old names in the renamed tree: none is
// left as a word of its own, except the old product name in Markdown where
// it names the original project, the LICENSE's copyright notice and this
// tool.
func checkLeftovers(t *testing.T, dst, oldModule, oldName string) {
	t.Helper()
	spellings := []string{oldName, capitalize(oldName), strings.ToUpper(oldName)}
	metric := regexp.MustCompile(`\b` + regexp.QuoteMeta(oldName) + `_[a-z]`)
	var kept []string
	err := filepath.WalkDir(dst, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, full)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == selfDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || skipFile(rel) {
			return nil
		}
		b, err := os.ReadFile(full)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			return err
		}
		if bytes.Contains(b, []byte(oldModule)) {
			t.Errorf("%s still names the module %s", rel, oldModule)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			if strings.HasSuffix(rel, ".go") && metric.MatchString(text) {
				t.Errorf("%s:%d: a %s_ name is left: %s", rel, line, oldName, text)
				continue
			}
			for _, w := range spellings {
				for range wordsAt(text, w) {
					if strings.HasSuffix(rel, ".md") && w == capitalize(oldName) {
						kept = append(kept, rel)
						continue
					}
					t.Errorf("%s:%d: %q is left: %s", rel, line, w, text)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%q kept in Markdown: %v", capitalize(oldName), kept)
}

func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	t.Logf("go %s in the copy (%s)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("go %s in the renamed copy: %v\n%s%s", strings.Join(args, " "), err, b, stderr.String())
	}
	return string(b)
}

// copyTree copies the files of root that git would commit (tracked, or
// new and not ignored) into dst, and returns how many.
func copyTree(t *testing.T, root, dst string) int {
	t.Helper()
	list := gitOutput(t, root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(rel))
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) { // deleted in the working tree
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := copyFile(src, to, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(b)
}

// The rules, one by one, on text that names the old project in each way
// the repository does.
func TestRewriteRules(t *testing.T) {
	t.Parallel()
	r := newRewriter("github.com/sekali/sekali", "example.com/myshop", "sekali", "myshop", "MyShop")
	for _, tc := range []struct{ path, in, want string }{
		{"go.mod", "module github.com/sekali/sekali\n\ngo 1.26\n", "module example.com/myshop\n\ngo 1.26\n"},
		{"a.go", `import "github.com/sekali/sekali/app/store"`, `import "example.com/myshop/app/store"`},
		{"a.md", "see github.com/sekali/sekali.", "see example.com/myshop."},
		{"m.go", `counterVec("sekali_callbacks_total", "x")`, `counterVec("myshop_callbacks_total", "x")`},
		{"c.go", `name := "sekali_test_" + randomHex(8); t := "sekali_tmpl_" + h`, `name := "myshop_test_" + randomHex(8); t := "myshop_tmpl_" + h`},
		{"Makefile", `LIKE 'sekali\_test\_%'`, `LIKE 'myshop\_test\_%'`},
		{"c.go", `DefaultDatabaseURL = "postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable"`, `DefaultDatabaseURL = "postgres://postgres:postgres@127.0.0.1:5432/myshop?sslmode=disable"`},
		{"docker-compose.yml", "name: sekali\nx-sekali-env: &sekali-env\n  POSTGRES_DB: sekali\n  image: sekali:local\n  environment: *sekali-env\n  test: [\"CMD\", \"pg_isready\", \"-d\", \"sekali\"]\n",
			"name: myshop\nx-myshop-env: &myshop-env\n  POSTGRES_DB: myshop\n  image: myshop:local\n  environment: *myshop-env\n  test: [\"CMD\", \"pg_isready\", \"-d\", \"myshop\"]\n"},
		{"t.go", `os.Getenv("SEKALI_TEST_LOG")`, `os.Getenv("MYSHOP_TEST_LOG")`},
		{"Dockerfile", "RUN go build -o /out/sekali ./cmd/sekali\nENTRYPOINT [\"/usr/local/bin/sekali\"]\n", "RUN go build -o /out/myshop ./cmd/myshop\nENTRYPOINT [\"/usr/local/bin/myshop\"]\n"},
		{"r.go", `fmt.Fprintln(os.Stderr, "sekali:", err); run(ctx, []string{"sekali", "serve"})`, `fmt.Fprintln(os.Stderr, "myshop:", err); run(ctx, []string{"myshop", "serve"})`},
		{".gitignore", "/bin/\n/sekali\n", "/bin/\n/myshop\n"},
		{"v.templ", `<a class="brand">Sekali admin</a> <code>sekali seed</code>`, `<a class="brand">MyShop admin</a> <code>myshop seed</code>`},
		{"x_test.go", `func checkSekaliEnv() {}; sekaliBinary(t); window.__sekaliMarker; "sekali_admin"`, `func checkMyShopEnv() {}; myshopBinary(t); window.__myshopMarker; "myshop_admin"`},
		{"k.js", `} from './lib/sekali.js';`, `} from './lib/myshop.js';`},
		{"alerts.yml", "runbook_url: https://github.com/sekali/sekali/blob/main/docs/operations.md#sekalidown", "runbook_url: https://example.com/myshop/blob/main/docs/operations.md#myshopdown"},
		// Markdown: the original's name stays where it names the original.
		{"README.md", "# Sekali\n\nSekali (\"once\") is a Go reference application. Sekali's promises.\n\n## Forking Sekali\n\nSekali is meant to be forked: see `cmd/sekali/serve.go`.\n\n### Keep\n\nSekali's outbox.\n\n## Other\n\nSekali again.\n",
			"# MyShop\n\nSekali (\"once\") is a Go reference application. MyShop's promises.\n\n## Forking Sekali\n\nSekali is meant to be forked: see `cmd/myshop/serve.go`.\n\n### Keep\n\nSekali's outbox.\n\n## Other\n\nMyShop again.\n"},
		// Outside Markdown, no exception.
		{"a.go", `// Sekali ("once") is`, `// MyShop ("once") is`},
	} {
		if got := string(r.rewrite(tc.path, []byte(tc.in)).new); got != tc.want {
			t.Errorf("%s:\n  in   %q\n  got  %q\n  want %q", tc.path, tc.in, got, tc.want)
		}
	}
}

// A new name that contains the old one, or a module path that does, is
// written once and not rewritten by a later rule.
func TestRewriteOnce(t *testing.T) {
	t.Parallel()
	r2 := newRewriter("github.com/sekali/sekali", "github.com/acme/sekali", "sekali", "sekalishop", "SekaliShop")
	in := "import \"github.com/sekali/sekali/models\"\n// Sekali serves sekali_callbacks_total; bin/sekali serve\n"
	want := "import \"github.com/acme/sekali/models\"\n// SekaliShop serves sekalishop_callbacks_total; bin/sekalishop serve\n"
	if got := string(r2.rewrite("a.go", []byte(in)).new); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Without a name only the module path changes.
	m := newRewriter("github.com/sekali/sekali", "example.com/myshop", "sekali", "", "")
	in = "import \"github.com/sekali/sekali/models\" // sekali serve, Sekali, github.com/sekali/sekalix\n"
	want = "import \"example.com/myshop/models\" // sekali serve, Sekali, github.com/sekali/sekalix\n"
	if got := string(m.rewrite("a.go", []byte(in)).new); got != want {
		t.Errorf("module only: got %q, want %q", got, want)
	}
}

// Only whole words are the old name: a word that contains it, or an
// identifier in which it is not a camelCase part, is someone else's.
func TestRewriteWholeWords(t *testing.T) {
	t.Parallel()
	r := newRewriter("github.com/acme/shop", "example.com/bigstore", "shop", "bigstore", "Bigstore")
	in := `import "github.com/Shopify/toxiproxy/v2" // the shops in a workshop; Shop shop, ShopPage, shopCart, SHOP_TEST_LOG, shop_test_, SHOPPING`
	want := `import "github.com/Shopify/toxiproxy/v2" // the shops in a workshop; Bigstore shop, BigstorePage, bigstoreCart, BIGSTORE_TEST_LOG, bigstore_test_, SHOPPING`
	if got := string(r.rewrite("a.go", []byte(in)).new); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{"shop.go", "bigstore.go"}, {"shop_test.go", "bigstore_test.go"}, {"workshop.go", "workshop.go"}, {"shopify", "shopify"},
	} {
		if got := replaceWords(tc.in, "shop", "bigstore"); got != tc.want {
			t.Errorf("replaceWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The shop's brand is "<Title> shop", unless the title already says shop.
func TestRewriteBrand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, title, want string }{
		{"shop", "", "<a>Shop</a> · Shop admin"},
		{"myshop", "MyShop", "<a>MyShop</a> · MyShop admin"},
		{"toko", "", "<a>Toko shop</a> · Toko admin"},
	} {
		r := newRewriter("github.com/sekali/sekali", "example.com/"+tc.name, "sekali", tc.name, cmp.Or(tc.title, capitalize(tc.name)))
		if got := string(r.rewrite("v.templ", []byte("<a>Sekali shop</a> · Sekali admin")).new); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The README's architecture diagram stays aligned whatever the name's
// length.
func TestRewriteKeepsBoxesAligned(t *testing.T) {
	t.Parallel()
	in := "```\n" +
		"   ┌──────── sekali serve ──────────┐\n" +
		"   │ app/audit (sekali verify)      │\n" +
		"   └────────────────────────────────┘\n" +
		"```\n"
	for _, name := range []string{"shop", "myshop", "bigshopname"} {
		r := newRewriter("github.com/sekali/sekali", "example.com/"+name, "sekali", name, "")
		got := string(r.rewrite("README.md", []byte(in)).new)
		lines := strings.Split(got, "\n")
		width := -1
		for _, l := range lines[1:4] {
			if w := len([]rune(l)); width < 0 {
				width = w
			} else if w != width {
				t.Errorf("name %s: lines of different widths:\n%s", name, got)
				break
			}
		}
		if !strings.Contains(got, name+" serve") || !strings.Contains(got, "("+name+" verify)") {
			t.Errorf("name %s: not renamed:\n%s", name, got)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, s string) {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module github.com/sekali/sekali\n")
	write("cmd/sekali/main.go", "package main\n")
	write("cmd/myshop/keep.txt", "in the way\n")
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{Module: "github.com/sekali/sekali"}, "nothing to do"},
		{options{Module: "github.com/sekali/sekali", Name: "sekali"}, "nothing to do"},
		{options{Module: "example.com/x", Name: "My-Shop"}, "lower-case"},
		{options{Module: "example.com/x", Name: "x", Title: "My Shop"}, "capital"},
		{options{Module: "example.com//x"}, "not a module path"},
		{options{Module: "example.com/x", Name: "myshop"}, "cmd/myshop exists"},
	} {
		tc.o.Dir = dir
		var out bytes.Buffer
		err := run(tc.o, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.o, err, tc.want)
		}
	}
	// Nothing was written.
	if b, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(b) != "module github.com/sekali/sekali\n" {
		t.Errorf("go.mod changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, path.Join("cmd", "sekali", "main.go"))); err != nil {
		t.Error(err)
	}
}

// The arguments of a rename command are not uses of the new name: the
// README's example renames to its own name without a warning.
func TestRenameArgumentsAreNotTaken(t *testing.T) {
	t.Parallel()
	r := newRewriter("github.com/sekali/sekali", "github.com/acme/tokoku", "sekali", "tokoku", "Tokoku")
	for _, tc := range []struct {
		text  string
		taken int
	}{
		{"**Rename first:** `make rename MODULE=github.com/acme/tokoku NAME=tokoku`.", 0},
		{"usage: make rename MODULE=github.com/acme/tokoku [NAME=tokoku [TITLE=Tokoku]]", 0},
		{"go run ./tools/rename -module example.com/tokoku -name tokoku -title Tokoku", 0},
		{"Tokoku sells batik; see tokoku.example", 2},
		{"NAME=tokoku, then Tokoku is the brand", 1},
	} {
		p := &plan{}
		p.noteTaken(r, "x.md", tc.text)
		if p.taken != tc.taken {
			t.Errorf("%q: %d mentions counted, want %d", tc.text, p.taken, tc.taken)
		}
	}
}

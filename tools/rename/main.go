// Command rename makes a checkout of this repository yours: it rewrites
// the module path and, with -name, the product's name everywhere it is a
// name that a fork should own. `make rename MODULE=example.com/myshop
// NAME=myshop` runs it on the checkout; it rewrites files in place and
// renames a few, prints what it changed, regenerates the templ code (the
// generated files record columns, which a name of another length moves),
// then runs `go build ./...` and `go vet ./...` in each of its modules (the
// app's and the QA rig's, loadtest/). Review the result with
// `git status` and `git diff`.
//
//	go run ./tools/rename -module example.com/myshop [-name myshop [-title MyShop]] [-n]
//
// The old names are read from the tree, so the tool also works on a fork
// that was renamed before: the old module is go.mod's, the old name is the
// binary's directory under cmd/ (cmd/<last element of the module path>, or
// the only directory there; -from overrides it). Below, "sekali" stands for
// the old name, "Sekali" and "SEKALI" for its title and upper case, and
// myshop, Myshop (-title; default: the name with a capital) and MYSHOP for
// the new ones.
//
// It refuses to run when -module is the current module and there is no new
// name (a second run with the same arguments changes nothing and says so),
// when a file or directory it would rename to exists, or when the name is
// not lower-case letters and digits starting with a letter (it becomes a
// database name, a metric prefix, an environment variable prefix, part of
// Go identifiers and an image name, which all accept that and not much
// more).
//
// It warns when the new name already occurs in the tree as a word (NAME=shop
// in a tree that speaks of "the shop"): the fork works, but those words
// now read as its name, and a later rename from it would rewrite them too.
// The arguments of a rename command in the tree (the README's example,
// MODULE=github.com/acme/tokoku NAME=tokoku, or -name tokoku) are not such
// words: they only show how to call this tool.
//
// # What it reads
//
// Every regular file under the tree except: .git (a directory, or a
// worktree's file) and node_modules/; go.sum (it never names the module
// itself); LICENSE, COPYING and NOTICE files (the copyright notice names
// the authors of the original and must stay as it is); tools/rename/
// itself (its rules are written in terms of the original); binary files (a
// NUL byte or invalid UTF-8 in the content, an image, font or archive
// extension, or larger than 16 MiB: the built binary, the screenshots,
// which therefore still show the old name). Symbolic links are left alone.
// Ignored files are rewritten too (a local .env, results under
// loadtest/results/): they name the same databases.
//
// # Rules
//
// Each occurrence is claimed by the first rule that matches it, in this
// order, and rewritten once (a new name that contains the old one is not
// rewritten again). Only whole words count: the neighbours of an
// occurrence are not letters or digits, or it is a camelCase part
// (checkSekaliEnv, sekaliBinary). So a fork named shop renames again
// cleanly: "Shopify" in an import path, "shops" and "workshop" are not
// its name. The report counts the files each rule changed.
//
//  1. module path: the old module path as a whole word (go.mod, imports,
//     docs, links) becomes -module. This is the only rule without -name.
//  2. Prometheus metric prefix: sekali_<name> (sekali_callbacks_total,
//     sekali_jobs_stuck, …) becomes myshop_<name>, except the database
//     prefixes of rule 3 and sekali_admin (rule 9).
//  3. databases: the database name in postgres:// URLs (the default
//     DATABASE_URL, compose's), POSTGRES_DB and pg_isready -d in compose,
//     and the prefixes sekali_test_, sekali_tmpl_ and sekali_bench_ (also
//     written sekali\_test\_ in LIKE patterns): the test databases, their
//     templates, the benchmark's.
//  4. environment variables: SEKALI_<NAME> (SEKALI_TEST_DATABASE_URL,
//     SEKALI_TEST_LOG) becomes MYSHOP_<NAME>.
//  5. binary and commands: cmd/sekali, bin/sekali, out/sekali (so also
//     /usr/local/bin/sekali), `sekali <command>` for serve, migrate, seed,
//     verify and sign, the program name in Go strings ("sekali",
//     "sekali: …", "sekali "+name), and /sekali in .gitignore and
//     .dockerignore. The directory cmd/sekali itself is renamed (rule 10);
//     so is loadtest/cmd/sekali-replay, the replayer (rules 9 and 10).
//  6. Docker: the compose project (name: sekali), the image sekali:local and
//     the x-sekali-env anchor.
//  7. the shop's brand "Sekali shop" becomes "Myshop shop", or just the
//     title when it ends in "shop" ("Shop", not "Shop shop").
//  8. product name: Sekali becomes Myshop in every file, inside identifiers
//     too (checkSekaliEnv), in user-facing text ("Sekali admin", "Sekali
//     shop", "Sekali is serving on", the MAIL_FROM default "Sekali
//     <shop@…>", the demo products) and in docs prose ("Sekali's
//     promises…": the fork keeps the design, so the sentence stays true).
//     Kept in Markdown where the word names the original project and
//     renaming it would make the text false: "Sekali ("once")" (the
//     meaning of the word) and the section headed "Forking Sekali", which
//     is about the project the fork came from. Lower-case mentions in that
//     section (paths, commands) are still renamed: they name files of the
//     fork.
//     A heading's anchor goes with it: #sekalidown, GitHub's anchor of
//     the heading SekaliDown, becomes #myshopdown.
//  9. other mentions: whatever is left: sekali becomes myshop
//     (sekaliBinary, window.__sekaliMarker, the session cookie sekali_admin,
//     the realm sekali-admin, the sekali.local Message-ID domain, the k6
//     library lib/sekali.js and its imports, the npm package
//     sekali-loadtest, temporary-file prefixes), SEKALI becomes MYSHOP.
//  10. paths: every file or directory whose name has the word sekali is renamed
//     the same way (cmd/sekali, loadtest/k6/lib/sekali.js, a built
//     bin/sekali).
//
// Text is matched as written, never decoded: the development webhook
// secret, the base64 of a phrase with the old name in it, stays as it is
// (it is public and only has to agree between the places that hold it). A
// line of a box drawing (README's architecture diagram) whose length changed gets
// its padding before the closing edge lengthened or shortened to match, as
// far as that padding goes (the README's allows a name of up to 11
// letters).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// selfDir is this tool, relative to the tree: never rewritten.
const selfDir = "tools/rename"

const maxFileSize = 16 << 20

var (
	namePattern   = regexp.MustCompile(`^[a-z][a-z0-9]{0,29}$`)
	titlePattern  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,29}$`)
	modulePattern = regexp.MustCompile(`^[A-Za-z0-9_~-][A-Za-z0-9._~-]*(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*$`)
	binaryExt     = []string{".png", ".jpg", ".jpeg", ".gif", ".ico", ".webp", ".woff", ".woff2", ".ttf", ".otf", ".pdf", ".zip", ".gz", ".tgz", ".xz", ".zst", ".jar", ".wasm"}
)

type options struct {
	Dir      string // the tree
	Module   string // the new module path
	Name     string // the new name; empty: the module path only
	Title    string // the new product name; empty: Name with a capital
	FromName string // the old name; empty: detected
	DryRun   bool   // report, write nothing, skip the build
	Check    bool   // run go build and go vet afterwards
}

func main() {
	var o options
	flag.StringVar(&o.Dir, "dir", ".", "the tree to rename")
	flag.StringVar(&o.Module, "module", "", "the new module path, e.g. example.com/myshop (required)")
	flag.StringVar(&o.Name, "name", "", "the new name of the binary, databases, metrics, image and product, e.g. myshop")
	flag.StringVar(&o.Title, "title", "", "the product name in text (default: -name with a capital)")
	flag.StringVar(&o.FromName, "from", "", "the old name (default: the binary's directory under cmd/)")
	flag.BoolVar(&o.DryRun, "n", false, "dry run: say what would change, change nothing")
	flag.BoolVar(&o.Check, "check", true, "run go build ./... and go vet ./... afterwards")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./tools/rename -module example.com/myshop [-name myshop [-title MyShop]] [-n]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || o.Module == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rename:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(o options, out io.Writer) error {
	oldModule, oldName, err := detect(o.Dir, o.FromName)
	if err != nil {
		return err
	}
	if !modulePattern.MatchString(o.Module) || strings.Contains(o.Module, "//") || strings.HasSuffix(o.Module, "/") {
		return usageError{fmt.Sprintf("%q is not a module path", o.Module)}
	}
	if o.Name == oldName {
		o.Name = ""
	}
	if o.Name != "" && !namePattern.MatchString(o.Name) {
		return usageError{fmt.Sprintf("name %q: use lower-case letters and digits, starting with a letter (at most 30)", o.Name)}
	}
	if o.Title != "" && o.Name == "" {
		return usageError{"-title needs -name"}
	}
	if o.Title == "" && o.Name != "" {
		o.Title = capitalize(o.Name)
	}
	if o.Title != "" && !titlePattern.MatchString(o.Title) {
		return usageError{fmt.Sprintf("title %q: use letters and digits, starting with a capital (it also goes into Go identifiers)", o.Title)}
	}
	if o.Module == oldModule && o.Name == "" {
		return usageError{fmt.Sprintf("the module is already %s and there is no new name (it is %s): nothing to do", oldModule, oldName)}
	}

	r := newRewriter(oldModule, o.Module, oldName, o.Name, o.Title)
	p, err := r.plan(o.Dir)
	if err != nil {
		return err
	}
	p.report(out, r, o.DryRun)
	if o.DryRun {
		return nil
	}
	if err := p.apply(o.Dir); err != nil {
		return err
	}
	// The generated *_templ.go files record each expression's column in
	// its .templ source: a name of another length moves them.
	for _, dir := range p.templDirs(r) {
		fmt.Fprintf(out, "go tool templ generate -path %s\n", dir)
		cmd := exec.Command("go", "tool", "templ", "generate", "-path", dir)
		cmd.Dir = o.Dir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("regenerating %s: %w\n%s", dir, err, b)
		}
	}
	if o.Check {
		mods, err := modules(o.Dir)
		if err != nil {
			return err
		}
		for _, mod := range mods {
			for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
				args = append([]string{"-C", mod}, args...)
				fmt.Fprintf(out, "go %s\n", strings.Join(args, " "))
				cmd := exec.Command("go", args...)
				cmd.Dir = o.Dir
				cmd.Stdout, cmd.Stderr = out, out
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("go %s in the renamed tree: %w", strings.Join(args, " "), err)
				}
			}
		}
	}
	fmt.Fprintln(out, "done: review with git status and git diff, then commit")
	return nil
}

// modules lists the directories of the tree's Go modules, relative to
// dir: the app's (".") first, then each other go.mod's (the QA rig's,
// loadtest/), which names the app's module and is renamed with it.
func modules(dir string) ([]string, error) {
	mods := []string{"."}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && !d.IsDir() && filepath.Dir(p) != dir {
			rel, err := filepath.Rel(dir, filepath.Dir(p))
			if err != nil {
				return err
			}
			mods = append(mods, filepath.ToSlash(rel))
		}
		return nil
	})
	return mods, err
}

// detect reads the old module path from go.mod and the old name from the
// binary's directory under cmd/.
func detect(dir, fromName string) (module, name string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", "", err
	}
	m := regexp.MustCompile(`(?m)^module[ \t]+"?([^\s"]+)"?[ \t]*$`).FindSubmatch(b)
	if m == nil {
		return "", "", errors.New("go.mod has no module line")
	}
	module = string(m[1])
	if fromName != "" {
		name = fromName
	} else if st, err := os.Stat(filepath.Join(dir, "cmd", path.Base(module))); err == nil && st.IsDir() {
		name = path.Base(module)
	} else {
		entries, err := os.ReadDir(filepath.Join(dir, "cmd"))
		if err != nil {
			return "", "", fmt.Errorf("finding the binary's directory: %w", err)
		}
		var dirs []string
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			}
		}
		if len(dirs) != 1 {
			return "", "", usageError{fmt.Sprintf("cannot tell the old name from cmd/ (%v): pass -from", dirs)}
		}
		name = dirs[0]
	}
	if !namePattern.MatchString(name) {
		return "", "", usageError{fmt.Sprintf("old name %q: expected lower-case letters and digits; pass -from", name)}
	}
	return module, name, nil
}

// A rule claims the spans its patterns mark (submatch 1) and rewrites them.
type rule struct {
	name     string
	patterns []*regexp.Regexp
	// to returns the new text for the claimed old text, and whether the
	// match is this rule's at all (m holds the match's submatches).
	to func(old string, m []string) (string, bool)
}

type rewriter struct {
	oldModule, newModule string
	oldName, newName     string
	oldTitle, newTitle   string
	rules                []rule
	keepUpstream         *regexp.Regexp // Markdown: the title where it names the original
	forkHeading          *regexp.Regexp
}

func newRewriter(oldModule, newModule, oldName, newName, newTitle string) *rewriter {
	r := &rewriter{
		oldModule: oldModule, newModule: newModule,
		oldName: oldName, newName: newName,
		oldTitle: capitalize(oldName), newTitle: newTitle,
	}
	o, T, U := regexp.QuoteMeta(oldName), regexp.QuoteMeta(r.oldTitle), regexp.QuoteMeta(strings.ToUpper(oldName))
	to := func(s string) func(string, []string) (string, bool) {
		return func(string, []string) (string, bool) { return s, true }
	}
	re := regexp.MustCompile
	r.rules = append(r.rules, rule{"module path", []*regexp.Regexp{
		re(`(?:^|[^A-Za-z0-9_.-])(` + regexp.QuoteMeta(oldModule) + `)(?:[^A-Za-z0-9_-]|$)`),
	}, to(newModule)})
	if newName == "" {
		return r
	}
	newUpper := strings.ToUpper(newName)
	r.rules = append(r.rules,
		rule{"Prometheus metric prefix " + oldName + "_", []*regexp.Regexp{
			re(`(?:^|[^A-Za-z0-9_])(` + o + `)_([a-z][a-z0-9_]*)`),
		}, func(_ string, m []string) (string, bool) {
			for _, p := range []string{"test_", "tmpl_", "bench_", "admin"} {
				if strings.HasPrefix(m[2], p) {
					return "", false
				}
			}
			return newName, true
		}},
		rule{"database names", []*regexp.Regexp{
			re(`postgres(?:ql)?://[^\s"'` + "`" + `/]*/(` + o + `)(?:[^A-Za-z0-9_]|$)`),
			re(`POSTGRES_DB:[ \t]*["']?(` + o + `)\b`),
			re(`"-d",[ \t]*"(` + o + `)"`),
			re(`(?:^|[^A-Za-z0-9_])(` + o + `)\\?_(?:test|tmpl|bench)\\?_`),
		}, to(newName)},
		rule{"environment variables " + strings.ToUpper(oldName) + "_*", []*regexp.Regexp{
			re(`(?:^|[^A-Za-z0-9_])(` + U + `)_[A-Z]`),
		}, to(newUpper)},
		rule{"binary and commands", []*regexp.Regexp{
			re(`(?:^|[^A-Za-z0-9_.-])(?:cmd|bin|out)/(` + o + `)(?:[^A-Za-z0-9_.-]|$)`),
			re(`(?:^|[^A-Za-z0-9_.-])(` + o + `) (?:serve|migrate|seed|verify|sign|<command>)\b`),
			re(`"(` + o + `)(?:"|:|\s)`),
			re(`(?m)^/?(` + o + `)$`),
		}, to(newName)},
		rule{"Docker image and compose project", []*regexp.Regexp{
			re(`(?m)^name:[ \t]*["']?(` + o + `)["']?[ \t]*$`),
			re(`(?:^|[^A-Za-z0-9_.-])(` + o + `):local\b`),
			re(`(?:x-|[&*])(` + o + `)-env\b`),
		}, to(newName)},
		rule{"shop's brand " + r.oldTitle + " shop", []*regexp.Regexp{re(`(` + T + ` shop)\b`)}, to(brand(newTitle))},
		rule{"product name " + r.oldTitle, []*regexp.Regexp{re(`(` + T + `)`)}, to(newTitle)},
		// GitHub's anchor of a heading is the heading in lower case, so the
		// heading SekaliDown is linked as #sekalidown: not a word of its
		// own, yet renamed with the heading.
		rule{"heading anchors #" + oldName + "…", []*regexp.Regexp{re(`#(` + o + `[a-z0-9]+)`)},
			func(old string, _ []string) (string, bool) {
				return strings.ToLower(newTitle) + old[len(oldName):], true
			}},
		rule{"other mentions", []*regexp.Regexp{re(`(` + o + `|` + U + `)`)}, func(old string, _ []string) (string, bool) {
			if old == strings.ToUpper(old) {
				return newUpper, true
			}
			return newName, true
		}},
	)
	r.keepUpstream = re(`(` + T + `) \("once"\)`)
	r.forkHeading = re(`^(#{1,6})[ \t]+Forking ` + T + `\b`)
	return r
}

// fileResult is one file's rewrite.
type fileResult struct {
	path     string // slash-separated, relative to the tree
	old, new []byte
	rules    []int // indexes of the rules that changed it
	kept     int   // Markdown mentions kept on purpose
}

type plan struct {
	files   []fileResult
	renames [][2]string // relative old, new; deepest first
	// The new name where the tree already has it, before the rename: a
	// later rename from it would rewrite those mentions too.
	taken   int
	takenAt []string // the first few, as path:line
}

// plan reads the tree and computes every change without writing.
func (r *rewriter) plan(dir string) (*plan, error) {
	p := &plan{}
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, full)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && (d.Name() == ".git" || d.Name() == "node_modules" || rel == selfDir) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's .git file
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		if r.newName != "" && rel != "." {
			p.noteTaken(r, rel, d.Name())
			if base := replaceWords(d.Name(), r.oldName, r.newName); base != d.Name() {
				p.renames = append(p.renames, [2]string{rel, path.Join(path.Dir(rel), base)})
			}
		}
		if d.IsDir() || skipFile(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > maxFileSize {
			return err
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			return nil
		}
		p.noteTaken(r, rel, string(b))
		f := r.rewrite(rel, b)
		if !bytes.Equal(f.new, b) || f.kept > 0 {
			p.files = append(p.files, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Deepest first, so each rename happens while its parent still has
	// its old name.
	slices.SortStableFunc(p.renames, func(a, b [2]string) int {
		return strings.Count(b[0], "/") - strings.Count(a[0], "/")
	})
	for _, rn := range p.renames {
		// Renames run deepest first, so the parents still have their old
		// names when rn[0] is renamed to its new base name.
		target := filepath.Join(dir, filepath.FromSlash(rn[1]))
		if _, err := os.Lstat(target); err == nil {
			return nil, fmt.Errorf("cannot rename %s: %s exists", rn[0], rn[1])
		}
	}
	return p, nil
}

// noteTaken counts the whole-word mentions of the new name (any of its
// spellings) in text, a file's content or name, found at rel.
func (p *plan) noteTaken(r *rewriter, rel, text string) {
	if r.newName == "" {
		return
	}
	spellings := []string{r.newName, strings.ToUpper(r.newName), capitalize(r.newName)}
	if !slices.Contains(spellings, r.newTitle) {
		spellings = append(spellings, r.newTitle)
	}
	for _, w := range spellings {
		for _, k := range wordsAt(text, w) {
			if renameArgument(text, k) {
				continue
			}
			p.taken++
			if len(p.takenAt) < 3 {
				p.takenAt = append(p.takenAt, fmt.Sprintf("%s:%d", rel, strings.Count(text[:k], "\n")+1))
			}
		}
	}
}

// renameArgument reports whether the word at k is part of an argument of
// a rename command (MODULE=github.com/acme/tokoku NAME=tokoku, -name
// tokoku): the README's and the Makefile's example of this tool names the
// new name without being a use of it, and renaming to the example must
// not warn.
func renameArgument(text string, k int) bool {
	start := k
	for start > 0 && !strings.ContainsRune(" \t\n`'\"([{", rune(text[start-1])) {
		start--
	}
	for _, arg := range []string{"MODULE=", "NAME=", "TITLE="} {
		if strings.HasPrefix(text[start:], arg) {
			return true
		}
	}
	before := strings.TrimRight(text[:start], " \t")
	for _, flag := range []string{"-module", "-name", "-title"} {
		if strings.HasSuffix(before, flag) {
			return true
		}
	}
	return false
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func skipFile(rel string) bool {
	base := path.Base(rel)
	switch {
	case base == "go.sum":
		return true
	case strings.HasPrefix(base, "LICENSE"), strings.HasPrefix(base, "COPYING"), strings.HasPrefix(base, "NOTICE"):
		return true
	}
	return slices.Contains(binaryExt, strings.ToLower(path.Ext(base)))
}

// rewrite applies the rules to one file's content. Each claimed span is
// replaced by a token (\x00<n>\x00) at once and the tokens are expanded at
// the end, so no rule sees another's output.
func (r *rewriter) rewrite(rel string, b []byte) fileResult {
	f := fileResult{path: rel, old: b}
	s := string(b)
	var subst []string
	token := func(text string) string {
		subst = append(subst, text)
		return "\x00" + strconv.Itoa(len(subst)-1) + "\x00"
	}
	if r.newName != "" && strings.HasSuffix(rel, ".md") {
		s, f.kept = r.maskUpstream(s, token)
	}
	for i, ru := range r.rules {
		changed := false
		for _, re := range ru.patterns {
			// Matches include a character of context on each side, so two
			// occurrences one character apart need a second pass.
			for pass := 0; pass < 4; pass++ {
				var out strings.Builder
				last, n := 0, 0
				for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
					sub := make([]string, len(m)/2)
					for k := range sub {
						if m[2*k] >= 0 {
							sub[k] = s[m[2*k]:m[2*k+1]]
						}
					}
					if !isWord(s, m[2], m[3]) {
						continue
					}
					repl, ok := ru.to(sub[1], sub)
					if !ok {
						continue
					}
					out.WriteString(s[last:m[2]])
					out.WriteString(token(repl))
					last, n = m[3], n+1
				}
				if n == 0 {
					break
				}
				out.WriteString(s[last:])
				s, changed = out.String(), true
			}
		}
		if changed {
			f.rules = append(f.rules, i)
		}
	}
	s = tokenRE.ReplaceAllStringFunc(s, func(t string) string {
		n, _ := strconv.Atoi(t[1 : len(t)-1])
		return subst[n]
	})
	f.new = []byte(alignBoxes(string(b), s))
	return f
}

var tokenRE = regexp.MustCompile("\x00[0-9]+\x00")

// isWord reports whether s[i:j] stands as a word of its own: at each end
// the neighbour is not a letter or digit, or the end is a camelCase hump
// (checkSekaliEnv, sekaliBinary). So "Shop" in "Shopify" or "shop" in
// "workshop" is not the name shop, and a rename never rewrites them.
func isWord(s string, i, j int) bool {
	if i >= j {
		return false
	}
	first, _ := utf8.DecodeRuneInString(s[i:])
	last, _ := utf8.DecodeLastRuneInString(s[:j])
	if i > 0 {
		prev, _ := utf8.DecodeLastRuneInString(s[:i])
		if isAlnum(prev) && !(unicode.IsUpper(first) && !unicode.IsUpper(prev)) {
			return false
		}
	}
	if j < len(s) {
		next, _ := utf8.DecodeRuneInString(s[j:])
		if isAlnum(next) && !(unicode.IsUpper(next) && !unicode.IsUpper(last)) {
			return false
		}
	}
	return true
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordsAt are the offsets of the occurrences of w in s that isWord.
func wordsAt(s, w string) []int {
	var at []int
	for i := 0; w != ""; {
		k := strings.Index(s[i:], w)
		if k < 0 {
			break
		}
		k += i
		if isWord(s, k, k+len(w)) {
			at = append(at, k)
		}
		i = k + len(w)
	}
	return at
}

// replaceWords replaces each occurrence of old in s that isWord.
func replaceWords(s, old, new string) string {
	var out strings.Builder
	last := 0
	for _, k := range wordsAt(s, old) {
		out.WriteString(s[last:k])
		out.WriteString(new)
		last = k + len(old)
	}
	out.WriteString(s[last:])
	return out.String()
}

// brand is the shop's name for a product title: "Sekali shop", but a
// title that already ends in "shop" is not followed by another
// ("Shop", not "Shop shop").
func brand(title string) string {
	if strings.HasSuffix(strings.ToLower(title), "shop") {
		return title
	}
	return title + " shop"
}

// maskUpstream hides, in Markdown, the title where it names the original
// project: "Sekali ("once")" and the section headed "Forking Sekali".
func (r *rewriter) maskUpstream(s string, token func(string) string) (string, int) {
	kept := 0
	s = replaceSubmatch(r.keepUpstream, s, func(old string) string { kept++; return token(old) })
	lines := strings.SplitAfter(s, "\n")
	level := 0 // inside the fork section: its heading level
	for i, line := range lines {
		if h := headingLevel(line); h > 0 {
			if m := r.forkHeading.FindStringSubmatch(line); m != nil {
				level = len(m[1])
			} else if level > 0 && h <= level {
				level = 0
			}
		}
		if n := strings.Count(line, r.oldTitle); level > 0 && n > 0 {
			kept += n
			lines[i] = strings.ReplaceAll(line, r.oldTitle, token(r.oldTitle))
		}
	}
	return strings.Join(lines, ""), kept
}

func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) || (line[n] != ' ' && line[n] != '\t') {
		return 0
	}
	return n
}

func replaceSubmatch(re *regexp.Regexp, s string, f func(string) string) string {
	var out strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		out.WriteString(s[last:m[2]])
		out.WriteString(f(s[m[2]:m[3]]))
		last = m[3]
	}
	out.WriteString(s[last:])
	return out.String()
}

// alignBoxes keeps box drawings aligned: on a line with a closing box edge
// whose width changed, the run of padding (spaces or ─) just before the
// last edge absorbs the difference.
func alignBoxes(before, after string) string {
	if before == after || !strings.ContainsAny(after, "│┐┘┤") {
		return after
	}
	old, lines := strings.Split(before, "\n"), strings.Split(after, "\n")
	if len(old) != len(lines) {
		return after
	}
	for i, line := range lines {
		delta := utf8.RuneCountInString(line) - utf8.RuneCountInString(old[i])
		edge := strings.LastIndexAny(line, "│┐┘┤")
		if delta == 0 || edge <= 0 || !strings.ContainsAny(old[i], "│┐┘┤") {
			continue
		}
		pad := []rune(line[:edge])
		end := len(pad)
		if end == 0 {
			continue
		}
		start := end
		for start > 0 && pad[start-1] == pad[end-1] && (pad[end-1] == ' ' || pad[end-1] == '─') {
			start--
		}
		if end-start < 2 || end-start-delta < 1 {
			continue
		}
		fill := strings.Repeat(string(pad[end-1]), end-start-delta)
		lines[i] = string(pad[:start]) + fill + line[edge:]
	}
	return strings.Join(lines, "\n")
}

func (p *plan) report(out io.Writer, r *rewriter, dryRun bool) {
	verb := "rename"
	if dryRun {
		verb = "rename (dry run, nothing written)"
	}
	fmt.Fprintf(out, "%s: module %s -> %s", verb, r.oldModule, r.newModule)
	if r.newName != "" {
		fmt.Fprintf(out, "; name %s -> %s (%s -> %s, %s -> %s)", r.oldName, r.newName,
			r.oldTitle, r.newTitle, strings.ToUpper(r.oldName), strings.ToUpper(r.newName))
	}
	fmt.Fprintln(out)
	width := 0
	for _, ru := range r.rules {
		width = max(width, len(ru.name))
	}
	counts := make([]int, len(r.rules))
	changed, kept := 0, 0
	for _, f := range p.files {
		for _, i := range f.rules {
			counts[i]++
		}
		if len(f.rules) > 0 {
			changed++
		}
		kept += f.kept
	}
	for i, ru := range r.rules {
		fmt.Fprintf(out, "  %-*s  %4d files\n", width, ru.name, counts[i])
	}
	for _, rn := range p.renames {
		fmt.Fprintf(out, "  renamed %s -> %s\n", rn[0], rn[1])
	}
	fmt.Fprintf(out, "  %d files rewritten, %d paths renamed", changed, len(p.renames))
	if kept > 0 {
		fmt.Fprintf(out, "; %q kept %d times in Markdown where it names the original project", r.oldTitle, kept)
	}
	fmt.Fprintf(out, "; untouched: LICENSE, go.sum, %s/, binary files\n", selfDir)
	if p.taken > 0 {
		at := strings.Join(p.takenAt, ", ")
		if p.taken > len(p.takenAt) {
			at += ", …"
		}
		fmt.Fprintf(out, "warning: %q already occurred %d times in the tree as a word of its own (%s).\n"+
			"  The fork works, but those mentions now read as its name: a later rename from %s\n"+
			"  would rewrite them too. A name the tree does not use yet (say acme%s) avoids that.\n",
			r.newName, p.taken, at, r.newName, r.newName)
	}
}

// templDirs lists the directories of the .templ files the rename changed,
// by their new names.
func (p *plan) templDirs(r *rewriter) []string {
	var dirs []string
	for _, f := range p.files {
		if !strings.HasSuffix(f.path, ".templ") || bytes.Equal(f.old, f.new) {
			continue
		}
		parts := strings.Split(path.Dir(f.path), "/")
		for i := range parts {
			if r.newName != "" {
				parts[i] = replaceWords(parts[i], r.oldName, r.newName)
			}
		}
		if dir := path.Join(parts...); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// apply writes the new contents (keeping each file's mode), then renames.
func (p *plan) apply(dir string) error {
	for _, f := range p.files {
		if bytes.Equal(f.old, f.new) {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(f.path))
		info, err := os.Stat(full)
		if err != nil {
			return err
		}
		if err := os.WriteFile(full, f.new, info.Mode().Perm()); err != nil {
			return err
		}
	}
	for _, rn := range p.renames {
		// rn[0]'s parents still have their old names (deepest first).
		from := filepath.Join(dir, filepath.FromSlash(rn[0]))
		to := filepath.Join(filepath.Dir(from), path.Base(rn[1]))
		if err := os.Rename(from, to); err != nil {
			return err
		}
	}
	return nil
}

// Command testreport reads `go test -json` on stdin and prints go test's
// usual lines, each package's as soon as it finishes: make test pipes
// into it. Without -json, go test prints a package's result only after
// those listed before it, so a slow package early in the list holds every
// later line back for minutes and the run looks hung; with -json it
// streams events as they happen, which this turns back into text.
//
// It prints each package's result line (ok, FAIL, no test files), the
// output of each failed test and of a package that failed outside a test
// (a panic, a build error), and exits 1 when anything failed. A test
// that passed keeps its log to itself, as in go test without -v.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

func main() {
	failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// report copies the run from in to out and says whether anything failed.
func report(in io.Reader, out io.Writer) (failed bool, err error) {
	type key struct{ pkg, test string }
	logs := map[key]*strings.Builder{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // go test's own words, e.g. a package that does not load
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if logs[k] == nil {
				logs[k] = &strings.Builder{}
			}
			logs[k].WriteString(e.Output)
		case "fail":
			failed = true
			fallthrough
		case "pass", "skip":
			if e.Test != "" {
				if e.Action == "fail" && logs[k] != nil {
					fmt.Fprint(out, logs[k].String())
				}
				delete(logs, k)
				continue
			}
			// The package's end: its own lines, the result last. Passing
			// ones print only that ("ok …", "? … [no test files]").
			text := ""
			if logs[k] != nil {
				text = logs[k].String()
				delete(logs, k)
			}
			for l := range strings.Lines(text) {
				if e.Action == "fail" || isResult(l) {
					fmt.Fprint(out, l)
				}
			}
			for lk, log := range logs {
				if lk.pkg == e.Package {
					if e.Action == "fail" { // a test still running: a timeout's panic, a crash
						fmt.Fprint(out, log.String())
					}
					delete(logs, lk)
				}
			}
		}
	}
	return failed, sc.Err()
}

// isResult says whether l is go test's line for a package's result.
func isResult(l string) bool {
	for _, p := range []string{"ok  \t", "?   \t", "FAIL\t", "--- FAIL"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

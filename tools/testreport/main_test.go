package main

import (
	"strings"
	"testing"
)

// A package's line comes out when its end event comes in, whatever the
// order of the packages; a passing test's log stays quiet, a failing
// test's and a failing package's are shown; the exit says it failed.
func TestReport(t *testing.T) {
	t.Parallel()
	in := `{"Action":"start","Package":"x/slow"}
{"Action":"start","Package":"x/fast"}
{"Action":"run","Package":"x/fast","Test":"TestA"}
{"Action":"output","Package":"x/fast","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"x/fast","Test":"TestA","Output":"    a_test.go:9: quiet\n"}
{"Action":"output","Package":"x/fast","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"x/fast","Test":"TestA"}
{"Action":"output","Package":"x/fast","Output":"PASS\n"}
{"Action":"output","Package":"x/fast","Output":"ok  \tx/fast\t0.01s\n"}
{"Action":"pass","Package":"x/fast"}
{"Action":"output","Package":"x/none","Output":"?   \tx/none\t[no test files]\n"}
{"Action":"skip","Package":"x/none"}
{"ImportPath":"x/broken","Action":"build-output","Output":"x/broken/b.go:3:1: syntax error\n"}
{"ImportPath":"x/broken","Action":"build-fail"}
{"Action":"output","Package":"x/slow","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"x/slow","Test":"TestB","Output":"    b_test.go:7: loud\n"}
{"Action":"output","Package":"x/slow","Test":"TestB","Output":"--- FAIL: TestB (61.00s)\n"}
{"Action":"fail","Package":"x/slow","Test":"TestB"}
{"Action":"output","Package":"x/slow","Output":"FAIL\n"}
{"Action":"output","Package":"x/slow","Output":"FAIL\tx/slow\t61.20s\n"}
{"Action":"fail","Package":"x/slow"}
`
	var out strings.Builder
	failed, err := report(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "ok  \tx/fast\t0.01s\n" +
		"?   \tx/none\t[no test files]\n" +
		"x/broken/b.go:3:1: syntax error\n" +
		"=== RUN   TestB\n    b_test.go:7: loud\n--- FAIL: TestB (61.00s)\n" +
		"FAIL\nFAIL\tx/slow\t61.20s\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if !failed {
		t.Error("a failed run was reported as passing")
	}
	failed, _ = report(strings.NewReader(strings.SplitAfter(in, `"Package":"x/fast"}`+"\n")[0]), &out)
	if failed {
		t.Error("a passing run was reported as failed")
	}
}

package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// A JSON answer written again for a viewer keeps every value, every
// member in its order and its numbers as they were written, with its
// strings masked — a member's name too — and stays valid whatever the
// strings hold.
func TestRewriteJSONKeepsTheValue(t *testing.T) {
	t.Parallel()
	in := `{"z":1,"a":[true,false,null,1.50,-2e3,{"b":"x@example.com"}],"k\u0026":"a\u0026b \"q\" <tag>","y@example.com":{}, "e":[]}` + "\n"
	out, err := rewriteJSON([]byte(in), strings.ToUpper)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Z":1,"A":[true,false,null,1.50,-2e3,{"B":"X@EXAMPLE.COM"}],"K\u0026":"A\u0026B \"Q\" \u003cTAG\u003e","Y@EXAMPLE.COM":{},"E":[]}` + "\n"
	if string(out) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", out, want)
	}
	for _, bad := range []string{`{"a":1}{"b":2}`, `{"a":`, `[1,2`, `nope`} {
		if out, err := rewriteJSON([]byte(bad), strings.ToUpper); err == nil {
			t.Errorf("rewriteJSON(%q) = %q, want an error", bad, out)
		}
	}
	masked := maskJSON([]byte(`{"email":"a&b@example.com","n":"secret.user@example.com"}`), []string{"a&b@example.com"}, func(string) bool { return false })
	if !json.Valid(masked) || strings.Contains(string(masked), "secret") || strings.Contains(string(masked), "a&b") {
		t.Errorf("masked: %s", masked)
	}
}

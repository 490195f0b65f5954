package canonjson_test

import (
	"strings"
	"testing"

	"github.com/sekali/sekali/app/canonjson"
)

// Depth counts the nesting of arrays and objects, not the brackets inside
// strings, and stops just past its limit.
func TestDepth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  int
	}{
		{`1`, 10, 0},
		{`{}`, 10, 1},
		{`{"a":[1,{"b":[]}]}`, 10, 4},
		{`{"a":"[[[[{{{{"}`, 10, 1},
		{`{"a":"\"[[[[","b":[]}`, 10, 2},
		{`{"a\\":[[]]}`, 10, 3},
		{`[[],[],[[]]]`, 10, 3},
		{strings.Repeat("[", 9000) + strings.Repeat("]", 9000), 32, 33},
	} {
		if got := canonjson.Depth([]byte(tc.in), tc.limit); got != tc.want {
			t.Errorf("Depth(%.40q, %d) = %d, want %d", tc.in, tc.limit, got, tc.want)
		}
	}
}

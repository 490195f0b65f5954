package jsondiff_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/jsondiff"
)

// What a conflict's page shows: each path that differs, once, in path
// order — a member added, removed or changed, an array element past the
// other's end, a nested change at its own path; numbers compare as
// written; a key with / or ~ escaped as JSON Pointer says.
func TestDiff(t *testing.T) {
	t.Parallel()
	a := `{"id":"evt_1","data":{"amount":50000,"currency":"IDR","items":[1,2,3],"a/b":1},"gone":true,"same":{"x":[{"y":1}]}}`
	b := `{"id":"evt_1","data":{"amount":50000.0,"currency":"USD","items":[1,2],"a/b":2},"new":null,"same":{"x":[{"y":1}]}}`
	got, more, err := jsondiff.Diff([]byte(a), []byte(b), 100)
	if err != nil || more {
		t.Fatal(err, more)
	}
	want := []jsondiff.Change{
		{Path: "/data/a~1b", Kind: jsondiff.Changed, Before: "1", After: "2"},
		{Path: "/data/amount", Kind: jsondiff.Changed, Before: "50000", After: "50000.0"},
		{Path: "/data/currency", Kind: jsondiff.Changed, Before: `"IDR"`, After: `"USD"`},
		{Path: "/data/items/2", Kind: jsondiff.Removed, Before: "3"},
		{Path: "/gone", Kind: jsondiff.Removed, Before: "true"},
		{Path: "/new", Kind: jsondiff.Added, After: "null"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n got %+v\nwant %+v", got, want)
	}
	if got, _, _ := jsondiff.Diff([]byte(a), []byte(a), 100); len(got) != 0 {
		t.Errorf("a document against itself: %+v", got)
	}
	// A value of another type is one change at its path, not a walk.
	if got, _, _ := jsondiff.Diff([]byte(`{"x":{"y":1}}`), []byte(`{"x":[1]}`), 100); len(got) != 1 || got[0].Path != "/x" || got[0].Kind != jsondiff.Changed {
		t.Errorf("object to array: %+v", got)
	}
	// The whole document, when the roots differ.
	if got, _, _ := jsondiff.Diff([]byte(`1`), []byte(`"1"`), 100); len(got) != 1 || got[0].Path != "" {
		t.Errorf("scalars: %+v", got)
	}
}

// The list is bounded: past the limit, more says so.
func TestDiffIsBounded(t *testing.T) {
	t.Parallel()
	got, more, err := jsondiff.Diff([]byte(`{"a":1,"b":1,"c":1}`), []byte(`{"a":2,"b":2,"c":2}`), 2)
	if err != nil || len(got) != 2 || !more {
		t.Errorf("%d changes, more %v, %v; want 2 and more", len(got), more, err)
	}
	if _, _, err := jsondiff.Diff([]byte(`{`), []byte(`{}`), 2); err == nil {
		t.Error("not JSON: no error")
	}
}

// nested is an object nested depth deep whose member x is v at every
// level: two of them differ at every level, each change's path as long
// as its depth, so an unbounded list grows with the square of the depth.
func nested(depth int, v string) []byte {
	return []byte(strings.Repeat(`{"x":`+v+`,"n":`, depth) + "null" + strings.Repeat("}", depth))
}

// The work of a diff is bounded whatever the documents: what it lists
// takes at most MaxOutput bytes however deep they nest, and past a bound
// — depth, values visited, output — it answers ErrTooLarge, not a list.
func TestDiffOfHostileDocumentsIsBounded(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{10, 30, 1000, 9999} {
		got, _, err := jsondiff.Diff(nested(depth, "0"), nested(depth, "1"), 1<<20)
		size := 0
		for _, c := range got {
			size += len(c.Path) + len(c.Before) + len(c.After)
		}
		switch {
		case size > jsondiff.MaxOutput:
			t.Errorf("depth %d: %d changes of %d bytes, more than %d", depth, len(got), size, jsondiff.MaxOutput)
		case depth > jsondiff.MaxDepth && !errors.Is(err, jsondiff.ErrTooLarge):
			t.Errorf("depth %d: %d changes, %v; want too large to diff", depth, len(got), err)
		case depth <= jsondiff.MaxDepth && (err != nil || len(got) != depth):
			t.Errorf("depth %d: %d changes, %v; want %d", depth, len(got), err, depth)
		}
	}
	wide := func(v string) []byte {
		return []byte("[" + strings.Repeat(v+",", jsondiff.MaxNodes) + v + "]")
	}
	if _, _, err := jsondiff.Diff(wide("0"), wide("0"), 100); !errors.Is(err, jsondiff.ErrTooLarge) {
		t.Errorf("%d values each: %v, want too large to diff", jsondiff.MaxNodes+1, err)
	}
	long := func(v string) []byte {
		return []byte(`{"` + strings.Repeat("k", 1000) + `":[` + strings.Repeat(`{"a":`+v+`},`, 99) + `{"a":` + v + `}]}`)
	}
	if _, _, err := jsondiff.Diff(long("0"), long("1"), 100); !errors.Is(err, jsondiff.ErrTooLarge) {
		t.Errorf("100 changes under a 1,000-byte key: %v, want too large to diff", err)
	}
}

package jsondiff_test

import (
	"slices"
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

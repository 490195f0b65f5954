// Package jsondiff tells what differs between two JSON documents, path by
// path: what an operator needs to see of a conflict (the same event id
// delivered with another body). Numbers compare as written, as the
// fingerprint reads them: 1.0 and 1 differ.
//
// The documents are untrusted — whatever a sender put in a body — so the
// work of a diff is bounded: in the documents' size and depth, in the
// values it visits and in the bytes of what it lists. Past any bound the
// answer is ErrTooLarge, which a page shows as "too large to diff",
// never a partial or unbounded list.
package jsondiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/models"
)

// Bounds of one diff. Each path's length grows with its depth, and a
// document can differ at every level, so the listed paths grow with the
// square of the depth; MaxDepth and MaxOutput cut that. A callback body
// is at most 64 KiB and 32 deep (payments), so any delivery the pipeline
// accepts is within them; a body kept before those limits, or edited in
// the database, may not be.
const (
	MaxInput  = 256 << 10 // bytes of each document
	MaxDepth  = 32        // nesting of arrays and objects
	MaxNodes  = 20_000    // values visited, both documents together
	MaxOutput = 64 << 10  // bytes of the listed paths and values
	// maxEncoded bounds the bytes encoded to list values: a value is
	// encoded whole before it is cut to maxValue.
	maxEncoded = 4 * MaxInput
)

// ErrTooLarge is returned (wrapped, with the bound) for documents past
// a bound: there is no diff to show, only that it is too large to make.
var ErrTooLarge = errors.New("too large to diff")

// Kinds of change.
const (
	Added   = "added"   // in the second document only
	Removed = "removed" // in the first document only
	Changed = "changed" // in both, with another value
)

// Change is one difference. Path is a JSON Pointer (RFC 6901: "/data/0/id";
// "" is the whole document); Before and After are the values as compact
// JSON, at most maxValue bytes ("" where there is none).
type Change struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// maxValue bounds the text of one value in a Change.
const maxValue = 200

// Diff lists what differs from document a to document b, in path order,
// at most limit changes (and whether there were more). An error when
// either is not JSON.
func Diff(a, b []byte, limit int) ([]Change, bool, error) {
	for _, doc := range [][]byte{a, b} {
		if len(doc) > MaxInput {
			return nil, false, fmt.Errorf("%w: a document is larger than %d bytes", ErrTooLarge, MaxInput)
		}
		if canonjson.Depth(doc, MaxDepth) > MaxDepth {
			return nil, false, fmt.Errorf("%w: a document nests more than %d deep", ErrTooLarge, MaxDepth)
		}
	}
	va, err := decode(a)
	if err != nil {
		return nil, false, fmt.Errorf("jsondiff: the first document: %w", err)
	}
	vb, err := decode(b)
	if err != nil {
		return nil, false, fmt.Errorf("jsondiff: the second document: %w", err)
	}
	d := differ{limit: limit}
	d.walk("", va, vb)
	if d.err != nil {
		return nil, false, d.err
	}
	return d.changes, d.more, nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

type differ struct {
	limit   int
	changes []Change
	more    bool
	nodes   int   // values visited
	output  int   // bytes of the changes listed
	encoded int   // bytes encoded by text
	err     error // the bound passed, when one was: the walk stops
}

func (d *differ) add(c Change) {
	if d.err != nil {
		return
	}
	if len(d.changes) >= d.limit {
		d.more = true
		return
	}
	d.output += len(c.Path) + len(c.Before) + len(c.After)
	if d.output > MaxOutput {
		d.err = fmt.Errorf("%w: the changes take more than %d bytes", ErrTooLarge, MaxOutput)
		return
	}
	d.changes = append(d.changes, c)
}

func (d *differ) walk(path string, a, b any) {
	if d.nodes++; d.nodes > MaxNodes && d.err == nil {
		d.err = fmt.Errorf("%w: more than %d values to compare", ErrTooLarge, MaxNodes)
	}
	if d.err != nil {
		return
	}
	switch a := a.(type) {
	case map[string]any:
		if b, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(a)+len(b))
			for k := range a {
				keys = append(keys, k)
			}
			for k := range b {
				if _, ok := a[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				d.member(path+"/"+escape(k), a, b, k)
			}
			return
		}
	case []any:
		if b, ok := b.([]any); ok {
			for i := range max(len(a), len(b)) {
				p := path + "/" + strconv.Itoa(i)
				switch {
				case i >= len(b):
					d.add(Change{Path: p, Kind: Removed, Before: d.text(a[i])})
				case i >= len(a):
					d.add(Change{Path: p, Kind: Added, After: d.text(b[i])})
				default:
					d.walk(p, a[i], b[i])
				}
			}
			return
		}
	}
	if ta, tb := d.text(a), d.text(b); ta != tb {
		d.add(Change{Path: path, Kind: Changed, Before: ta, After: tb})
	}
}

func (d *differ) member(path string, a, b map[string]any, k string) {
	va, inA := a[k]
	vb, inB := b[k]
	switch {
	case !inB:
		d.add(Change{Path: path, Kind: Removed, Before: d.text(va)})
	case !inA:
		d.add(Change{Path: path, Kind: Added, After: d.text(vb)})
	default:
		d.walk(path, va, vb)
	}
}

// escape is key k as a JSON Pointer reference token.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// text is v as compact JSON, cut at maxValue bytes.
func (d *differ) text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if d.encoded += len(b); d.encoded > maxEncoded && d.err == nil {
		d.err = fmt.Errorf("%w: the values take more than %d bytes", ErrTooLarge, maxEncoded)
	}
	if len(b) > maxValue {
		return models.Truncate(string(b), maxValue) + "…"
	}
	return string(b)
}

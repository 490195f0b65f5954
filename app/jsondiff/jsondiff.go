// Package jsondiff tells what differs between two JSON documents, path by
// path: what an operator needs to see of a conflict (the same event id
// delivered with another body). Numbers compare as written, as the
// fingerprint reads them: 1.0 and 1 differ.
package jsondiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sekali/sekali/models"
)

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
}

func (d *differ) add(c Change) {
	if len(d.changes) >= d.limit {
		d.more = true
		return
	}
	d.changes = append(d.changes, c)
}

func (d *differ) walk(path string, a, b any) {
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
					d.add(Change{Path: p, Kind: Removed, Before: text(a[i])})
				case i >= len(a):
					d.add(Change{Path: p, Kind: Added, After: text(b[i])})
				default:
					d.walk(p, a[i], b[i])
				}
			}
			return
		}
	}
	if ta, tb := text(a), text(b); ta != tb {
		d.add(Change{Path: path, Kind: Changed, Before: ta, After: tb})
	}
}

func (d *differ) member(path string, a, b map[string]any, k string) {
	va, inA := a[k]
	vb, inB := b[k]
	switch {
	case !inB:
		d.add(Change{Path: path, Kind: Removed, Before: text(va)})
	case !inA:
		d.add(Change{Path: path, Kind: Added, After: text(vb)})
	default:
		d.walk(path, va, vb)
	}
}

// escape is key k as a JSON Pointer reference token.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// text is v as compact JSON, cut at maxValue bytes.
func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > maxValue {
		return models.Truncate(string(b), maxValue) + "…"
	}
	return string(b)
}

package store

import (
	"strings"
	"time"

	"gorm.io/gorm"
)

// The console's lists are newest first and keyset-paginated on id: a page
// ends at the smallest id it shows and the next page starts below it, so
// a deep page costs what the first one does (OFFSET would read and throw
// away every row before it). A list limited to a time window is ordered
// by that time instead (WindowKeyset).

// MaxPageSize bounds every list page; DefaultPageSize is a page's size
// when none is asked for.
const (
	MaxPageSize     = 200
	DefaultPageSize = 50
)

// PageSize is limit bounded to 1..MaxPageSize, DefaultPageSize when unset.
func PageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// Keyset reads one page of q into rows, ids descending, starting below
// the cursor before (the zero value: from the top). It returns the cursor
// of the next page — the last id shown — or the zero value when nothing
// follows; it reads one row more than it shows to know.
func Keyset[T any, K comparable](q *gorm.DB, before K, limit int, rows *[]T, idOf func(T) K) (next K, err error) {
	limit = PageSize(limit)
	var zero K
	if before != zero {
		q = q.Where("id < ?", before)
	}
	if err := q.Order("id DESC").Limit(limit + 1).Find(rows).Error; err != nil {
		return zero, Classify(err)
	}
	if len(*rows) <= limit {
		return zero, nil
	}
	*rows = (*rows)[:limit]
	return idOf((*rows)[limit-1]), nil
}

// Window limits q to rows whose column lies in [from, to); a zero time
// leaves that side open.
func Window(q *gorm.DB, column string, from, to time.Time) *gorm.DB {
	if !from.IsZero() {
		q = q.Where(column+" >= ?", from.UTC())
	}
	if !to.IsZero() {
		q = q.Where(column+" < ?", to.UTC())
	}
	return q
}

// WindowKeyset is Keyset over the rows of table whose column (a
// timestamp with an index) lies in [from, to). Without a window it is
// Keyset. With one, the page is ordered by column, newest first, ties by
// id: walking the id index backwards to find a window days in the past
// would read every newer row first, while the column's index goes
// straight to it. The cursor stays the last row's id; the next page
// starts below that row's (column, id), looked up by primary key.
func WindowKeyset[T any, K comparable](q *gorm.DB, table, column string, from, to time.Time,
	before K, limit int, rows *[]T, idOf func(T) K) (next K, err error) {
	if from.IsZero() && to.IsZero() {
		return Keyset(q, before, limit, rows, idOf)
	}
	q = Window(q, column, from, to)
	limit = PageSize(limit)
	var zero K
	if before != zero {
		q = q.Where("("+column+", id) < (SELECT "+column+", id FROM "+table+" WHERE id = ?)", before)
	}
	if err := q.Order(column + " DESC, id DESC").Limit(limit + 1).Find(rows).Error; err != nil {
		return zero, Classify(err)
	}
	if len(*rows) <= limit {
		return zero, nil
	}
	*rows = (*rows)[:limit]
	return idOf((*rows)[limit-1]), nil
}

// LikePrefix is a LIKE pattern that matches strings starting with p, with
// LIKE's own wildcards in p taken literally.
func LikePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

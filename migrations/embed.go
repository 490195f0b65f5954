// Package migrations holds the SQL migrations, embedded into the binary and
// applied with goose. The schema is only ever changed here: never AutoMigrate.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
)

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS

// Hash names this set of migrations: 12 hex digits of a SHA-256 over
// every file's name, length and content. The tests' template database
// carries it in its name (app/testenv), so a changed migration builds a
// new template, and tools/testclean finds this checkout's template by it.
func Hash() string {
	h := sha256.New()
	err := fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS, path)
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		panic(err) // an embedded FS that cannot be read: the binary is broken
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

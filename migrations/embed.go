// Package migrations holds the SQL migrations, embedded into the binary and
// applied with goose. The schema is only ever changed here: never AutoMigrate.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS

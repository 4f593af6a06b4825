// Package migrations holds the SQL migrations of every module, applied with
// goose. Each module owns its own PostgreSQL schema.
package migrations

import "embed"

// FS is the folder of goose SQL migrations.
//
//go:embed *.sql
var FS embed.FS

package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/postgres"
)

// PrintJSONLines writes each item as one line of JSON, for jq.
func PrintJSONLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, item := range items {
		if err := enc.Encode(item); err != nil {
			return err
		}
	}
	return nil
}

// PrintList writes items as JSON lines on stdout, or, when there are none,
// says so on stderr ("no " + what), so an empty answer is never silence and
// stdout stays clean for scripts.
func PrintList[T any](stdout, stderr io.Writer, items []T, what string) error {
	if len(items) == 0 {
		fmt.Fprintf(stderr, "no %s\n", what)
		return nil
	}
	return PrintJSONLines(stdout, items)
}

// OpenDatabase opens PIN_DATABASE_URL for a command that only runs SQL,
// with sessions named "cli".
func OpenDatabase(ctx context.Context, environ []string) (*sql.DB, error) {
	db, err := OpenGormDatabaseAs(ctx, environ, "cli")
	if err != nil {
		return nil, err
	}
	return db.DB()
}

// OpenGormDatabaseAs opens PIN_DATABASE_URL, the only variable the operator
// commands need, with sessions named role (postgres.ApplicationName).
// GORM's statement lines are dropped: the command prints the error once,
// and an operator reads no SQL.
func OpenGormDatabaseAs(ctx context.Context, environ []string, role string) (*gorm.DB, error) {
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return nil, err
	}
	return postgres.OpenPool(ctx, cfg.DatabaseURL, postgres.PoolConfig{
		ApplicationName: postgres.ApplicationName(role),
		Logger:          slog.New(slog.DiscardHandler),
	})
}

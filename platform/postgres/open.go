package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Pool limits. The monolith serves HTTP, runs the expiry job and the outbox
// forwarder on one pool; PostgreSQL's default max_connections (100) must also
// leave room for `pin expire-promotions --once` and operators.
const (
	maxOpenConns    = 20
	maxIdleConns    = 10
	connMaxLifetime = 30 * time.Minute
	connMaxIdleTime = 5 * time.Minute
	// slowQuery is the threshold above which GORM logs a statement.
	slowQuery = 200 * time.Millisecond
)

// Open connects GORM to PostgreSQL through pgx and checks the connection.
//
// Every session runs with TimeZone=UTC, so that timestamp columns without a
// time zone (watermill's created_at) hold UTC. Prepared statements are off
// in GORM (pgx still caches statements per connection) because transactions
// are handed to watermill-sql as plain *sql.Tx. GORM logs only slow
// statements and errors, with their parameters left out.
func Open(ctx context.Context, url string) (*gorm.DB, error) {
	dsn, err := withUTC(url)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(gormpostgres.New(gormpostgres.Config{DSN: dsn}), &gorm.Config{
		PrepareStmt:          false,
		DisableAutomaticPing: true,
		NowFunc:              func() time.Time { return time.Now().UTC() },
		Logger:               NewLogger(slog.Default(), slowQuery),
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	sqlDB.SetMaxOpenConns(maxOpenConns)
	sqlDB.SetMaxIdleConns(maxIdleConns)
	sqlDB.SetConnMaxLifetime(connMaxLifetime)
	sqlDB.SetConnMaxIdleTime(connMaxIdleTime)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", Redact(url), err)
	}
	return db, nil
}

// withUTC adds timezone=UTC to a URL or keyword/value connection string
// unless it names a time zone already.
func withUTC(dsn string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("postgres: parse database URL: %w", err)
		}
		q := u.Query()
		for k := range q {
			if strings.EqualFold(k, "timezone") {
				return dsn, nil
			}
		}
		q.Set("timezone", "UTC")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if strings.Contains(strings.ToLower(dsn), "timezone=") {
		return dsn, nil
	}
	return strings.TrimSpace(dsn + " timezone=UTC"), nil
}

// Redact returns the database URL with its password replaced, for logs and
// error messages.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// IsUnavailable reports whether err means the server could not be reached
// at all (nothing listening, refused, DNS), as opposed to a failing query.
func IsUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr)
}

// Package testbed gives integration tests real infrastructure: a fresh
// PostgreSQL database per call, cloned from a migrated template, and an
// in-process Kafka-protocol broker (franz-go's kfake).
//
// # Databases
//
// NewDatabase clones a template database that carries every migration of
// package migrations. The template's name holds a hash of the migration
// files, so it is rebuilt when a migration changes and reused across test
// runs otherwise; several test binaries (go test runs packages as separate
// processes) build it at most once between them, under a PostgreSQL advisory
// lock. Each clone is dropped when the test ends. No test ever uses or wipes
// a shared database.
//
// # Topics
//
// DeclareTopics names the outbox topics of the modules under test: the
// template gets each one's table from the one definition
// (outbox.create_topic), as `pin migrate up` makes them, and a topic
// declared after the template was made gets its table in each new clone.
//
// # Transactions
//
// Every test database is created with idle_in_transaction_session_timeout
// (IdleInTransactionTimeout), so a transaction a test forgets is cut off
// rather than holding locks and the cluster's vacuum horizon.
package testbed

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"gorm.io/gorm"

	"github.com/pinmarket/pin/migrations"
	"github.com/pinmarket/pin/platform/postgres"
)

// DefaultURL is the server used when PIN_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URLEnv names the environment variable with the base URL of the test
// server. Its database is used only to create and drop the test databases.
const URLEnv = "PIN_TEST_DATABASE_URL"

// IdleInTransactionTimeout is set on every test database: a session left
// idle inside a transaction longer than this is terminated (see the package
// documentation).
const IdleInTransactionTimeout = 30 * time.Second

// ForwardDeadline is how long a test should wait for the outbox relay to
// deliver something: far above the relay's own bound (a poll interval and
// a round trip), for a machine busy with the rest of the suite.
const ForwardDeadline = 45 * time.Second

// templateLockKey is the advisory lock (cluster-wide) under which test
// processes build templates and drop leaked databases.
const templateLockKey int64 = 0x70696e7465737462 // "pintestb"

const (
	templatePrefix = "pin_tmpl_"
	testDBPrefix   = "pin_test_"
)

// Database is one fresh, migrated database for one test.
type Database struct {
	// URL connects to the database (for code under test that opens its own
	// pool, or for a subprocess).
	URL string
	// SQL is a pool on the database; the same pool as Gorm uses.
	SQL *sql.DB
	// Gorm is opened with postgres.Open, like the service does.
	Gorm *gorm.DB
	// Name is the database's name.
	Name string
}

// server is the per-process connection to the test server's maintenance
// database and the template it has made sure of.
type server struct {
	base     *url.URL
	admin    *sql.DB
	template string
	// templateTopics are the declared topics the template has tables for.
	templateTopics []string
	// hold keeps, for the life of the process, a shared advisory lock on
	// the template in use, so that no other process drops it as stale.
	hold *sql.Conn
}

var (
	serverMu  sync.Mutex
	theServer *server
	// declared are the topics of DeclareTopics, guarded by serverMu.
	declared []string
)

// DeclareTopics declares outbox topics whose tables every database this
// process makes has: the topics a module declares to the host, so that its
// tests see the tables `pin migrate up` would make. Declaring before the
// first NewDatabase (TestMain) puts them in the template; later, each new
// database makes them. Repeating a topic is harmless.
func DeclareTopics(topics ...string) {
	serverMu.Lock()
	defer serverMu.Unlock()
	for _, t := range topics {
		if !slices.Contains(declared, t) {
			declared = append(declared, t)
		}
	}
}

// ensureTopicsQuery makes the topics' tables through the outbox's one
// definition; platform/outbox's EnsureTopics runs the same call (this
// package cannot import it: the outbox's own tests import this one).
const ensureTopicsQuery = `SELECT outbox.create_topic(t) FROM unnest($1::text[]) AS t`

// topicsNotIn returns the declared topics missing from have.
func topicsNotIn(have []string) []string {
	serverMu.Lock()
	defer serverMu.Unlock()
	var missing []string
	for _, t := range declared {
		if !slices.Contains(have, t) {
			missing = append(missing, t)
		}
	}
	return missing
}

// NewDatabase creates a fresh database cloned from the migrated template,
// opens it and drops it (WITH (FORCE)) when tb ends. It fails tb with a hint
// on how to start PostgreSQL when the server is unreachable.
func NewDatabase(tb testing.TB) *Database {
	tb.Helper()
	return newDatabase(tb, func(srv *server) string { return srv.template })
}

// NewEmptyDatabase is NewDatabase without the migrations: an empty database,
// for a binary that migrates it with its own (an older build's, say).
func NewEmptyDatabase(tb testing.TB) *Database {
	tb.Helper()
	return newDatabase(tb, func(*server) string { return "template0" })
}

func newDatabase(tb testing.TB, template func(*server) string) *Database {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	srv, err := getServer(ctx)
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}

	name := testDBPrefix + strconv.Itoa(os.Getpid()) + "_" + randomSuffix()
	if err := srv.createFrom(ctx, name, template(srv)); err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := srv.admin.ExecContext(ctx,
			"DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("testbed: drop database %s: %v", name, err)
		}
	})

	u := *srv.base
	u.Path = "/" + name
	dbURL := u.String()
	gdb, err := postgres.Open(ctx, dbURL)
	if err != nil {
		tb.Fatalf("testbed: open %s: %v", name, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	// Registered after the drop, so it runs before it.
	tb.Cleanup(func() { _ = sqlDB.Close() })
	if extra := topicsNotIn(srv.templateTopics); len(extra) > 0 && template(srv) == srv.template {
		if _, err := sqlDB.ExecContext(ctx, ensureTopicsQuery, extra); err != nil {
			tb.Fatalf("testbed: the declared topics' outbox tables: %v", err)
		}
	}
	return &Database{URL: dbURL, SQL: sqlDB, Gorm: gdb, Name: name}
}

// BaseURL returns the URL of the test server's maintenance database.
func BaseURL() string {
	if v := os.Getenv(URLEnv); v != "" {
		return v
	}
	return DefaultURL
}

func getServer(ctx context.Context) (*server, error) {
	serverMu.Lock()
	defer serverMu.Unlock()
	if theServer != nil {
		return theServer, nil
	}
	raw := BaseURL()
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "postgres" && base.Scheme != "postgresql") {
		return nil, fmt.Errorf("%s must be a postgres:// URL, got %q", URLEnv, postgres.Redact(raw))
	}
	admin, err := sql.Open("pgx", raw)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", postgres.Redact(raw), err)
	}
	// One connection holds the template lock for the life of the process.
	admin.SetMaxOpenConns(5)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := admin.PingContext(pingCtx); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("PostgreSQL is not reachable at %s: %w\n"+
			"Integration tests need PostgreSQL 15+. Start the local cluster with\n"+
			"    pg_ctlcluster --skip-systemctl-redirect 15 main start\n"+
			"or point %s at a server where this user may CREATE DATABASE",
			postgres.Redact(raw), err, URLEnv)
	}
	srv := &server{base: base, admin: admin}
	if err := srv.prepare(ctx); err != nil {
		_ = admin.Close()
		return nil, err
	}
	theServer = srv
	return srv, nil
}

// prepare makes sure the template for the current migrations and declared
// topics exists, and drops databases leaked by test processes that died,
// all under the cluster-wide advisory lock. Its caller holds serverMu.
func (s *server) prepare(ctx context.Context) error {
	hash, err := migrationsHash()
	if err != nil {
		return err
	}
	// The template of one set of migrations is made for each set of
	// declared topics; those of other migrations are stale.
	s.templateTopics = slices.Sorted(slices.Values(declared)) // getServer holds serverMu
	s.template = templatePrefix + hash
	if len(s.templateTopics) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(s.templateTopics, "\x00")))
		s.template += "_t" + hex.EncodeToString(sum[:4])
	}
	current := templatePrefix + hash

	conn, err := s.admin.Conn(ctx)
	if err != nil {
		return fmt.Errorf("admin connection: %w", err)
	}
	defer conn.Close()
	// A session lock, not a transaction lock: holding it opens no transaction,
	// so it does not hold back the snapshot horizon of other tests.
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("template lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey)
	}()

	if err := s.dropLeaked(ctx, conn); err != nil {
		return err
	}
	if err := s.holdTemplate(ctx); err != nil {
		return err
	}
	if err := s.dropStaleTemplates(ctx, conn, current); err != nil {
		return err
	}

	var exists bool
	if err := conn.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", s.template).Scan(&exists); err != nil {
		return fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return nil
	}
	return s.buildTemplate(ctx, conn)
}

// holdTemplate takes a shared advisory lock on the current template's name,
// kept until the process exits.
func (s *server) holdTemplate(ctx context.Context) error {
	hold, err := s.admin.Conn(ctx)
	if err != nil {
		return fmt.Errorf("admin connection: %w", err)
	}
	if _, err := hold.ExecContext(ctx,
		"SELECT pg_advisory_lock_shared(hashtextextended($1, 0))", s.template); err != nil {
		_ = hold.Close()
		return fmt.Errorf("hold template: %w", err)
	}
	s.hold = hold
	return nil
}

// dropStaleTemplates drops templates of older migration sets (whose names
// do not start with current) that no running test process holds, so edits
// to migrations do not pile up databases.
func (s *server) dropStaleTemplates(ctx context.Context, conn *sql.Conn, current string) error {
	rows, err := conn.QueryContext(ctx,
		"SELECT datname FROM pg_database WHERE datname LIKE $1 AND NOT starts_with(datname, $2) AND datistemplate",
		templatePrefix+"%", current)
	if err != nil {
		return fmt.Errorf("list templates: %w", err)
	}
	var stale []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return fmt.Errorf("list templates: %w", err)
		}
		stale = append(stale, name)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("list templates: %w", err)
	}
	for _, name := range stale {
		var free bool
		if err := conn.QueryRowContext(ctx,
			"SELECT pg_try_advisory_lock(hashtextextended($1, 0))", name).Scan(&free); err != nil {
			return fmt.Errorf("lock template %s: %w", name, err)
		}
		if !free {
			continue // another test process still clones from it
		}
		id := pgx.Identifier{name}.Sanitize()
		_, _ = conn.ExecContext(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false")
		_, _ = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
		_, _ = conn.ExecContext(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", name)
	}
	return nil
}

// buildTemplate migrates a scratch database and only then renames it to the
// template's name, so a process killed half-way never leaves a half-migrated
// template behind.
func (s *server) buildTemplate(ctx context.Context, conn *sql.Conn) error {
	build := s.template + "_build"
	buildID := pgx.Identifier{build}.Sanitize()
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+buildID+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop stale template build: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+buildID); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	u := *s.base
	u.Path = "/" + build
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return fmt.Errorf("open template: %w", err)
	}
	err = postgres.Migrate(ctx, db)
	if err == nil && len(s.templateTopics) > 0 {
		_, err = db.ExecContext(ctx, ensureTopicsQuery, s.templateTopics)
	}
	_ = db.Close()
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	tmplID := pgx.Identifier{s.template}.Sanitize()
	for _, stmt := range []string{
		"ALTER DATABASE " + buildID + " RENAME TO " + tmplID,
		// Nobody may connect to the template: CREATE DATABASE ... TEMPLATE
		// fails while another session is connected to it.
		"ALTER DATABASE " + tmplID + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("finish template: %w", err)
		}
	}
	return nil
}

// dropLeaked drops test databases whose creating process no longer runs
// (a test binary killed by a timeout or a signal never ran its cleanups).
// Only for a server on this machine, where the process ids mean something.
func (s *server) dropLeaked(ctx context.Context, conn *sql.Conn) error {
	host := s.base.Hostname()
	if host != "127.0.0.1" && host != "localhost" && host != "::1" && host != "" {
		return nil
	}
	rows, err := conn.QueryContext(ctx,
		"SELECT datname FROM pg_database WHERE datname LIKE $1", testDBPrefix+"%")
	if err != nil {
		return fmt.Errorf("list test databases: %w", err)
	}
	var leaked []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return fmt.Errorf("list test databases: %w", err)
		}
		pidPart, _, ok := strings.Cut(strings.TrimPrefix(name, testDBPrefix), "_")
		pid, err := strconv.Atoi(pidPart)
		if ok && err == nil && !processAlive(pid) {
			leaked = append(leaked, name)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("list test databases: %w", err)
	}
	for _, name := range leaked {
		_, _ = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return nil
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// createFrom clones template (the migrated one, or template0) into a new database.
func (s *server) createFrom(ctx context.Context, name, template string) error {
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() +
		" TEMPLATE " + pgx.Identifier{template}.Sanitize()
	for attempt := 0; ; attempt++ {
		_, err := s.admin.ExecContext(ctx, stmt)
		if err == nil {
			break
		}
		// 55006 object_in_use: someone is connected to the template (only
		// possible briefly, e.g. an operator); try again for a while.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" && attempt < 50 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("create database %s: %w", name, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		return fmt.Errorf("create database %s from %s: %w", name, template, err)
	}
	_, err := s.admin.ExecContext(ctx, fmt.Sprintf(
		"ALTER DATABASE %s SET idle_in_transaction_session_timeout = '%dms'",
		pgx.Identifier{name}.Sanitize(), IdleInTransactionTimeout.Milliseconds()))
	if err != nil {
		return fmt.Errorf("configure database %s: %w", name, err)
	}
	return nil
}

// migrationsHash hashes the names and contents of all migration files.
func migrationsHash() (string, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return "", fmt.Errorf("read migrations: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", fmt.Errorf("read migration %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

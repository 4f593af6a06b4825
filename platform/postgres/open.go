package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Pool limits of Open. `pin serve` splits the same 20 connections between an
// API pool (OpenAPI) and the background runners' pool (the outbox relay
// keeps one of the latter per topic for its advisory lock); PostgreSQL's
// default max_connections (100) must also leave room for `pin
// expire-promotions --once` and operators.
const (
	maxOpenConns    = 20
	connMaxLifetime = 30 * time.Minute
	connMaxIdleTime = 5 * time.Minute
	// slowQuery is the threshold above which GORM logs a statement.
	slowQuery = 200 * time.Millisecond
	// cancelWait is how long a cancelled statement's connection waits for
	// the server to confirm the cancel before it is closed instead.
	cancelWait = time.Second
	// connectTimeout bounds each host's connection attempt (connect_timeout,
	// whole seconds) unless the URL sets its own.
	connectTimeout = 2 * time.Second
)

// PoolConfig shapes a connection pool. Zero fields take Open's defaults;
// zero timeouts leave the server's (none).
type PoolConfig struct {
	// MaxOpenConns caps the pool's connections (20 when zero).
	MaxOpenConns int
	// StatementTimeout is every session's statement_timeout: the server
	// ends a statement that runs longer, even if its client has gone.
	StatementTimeout time.Duration
	// LockTimeout is every session's lock_timeout: a statement waiting
	// longer for a row or table lock fails with lock_not_available.
	LockTimeout time.Duration
	// IdleInTransactionTimeout is every session's
	// idle_in_transaction_session_timeout: the server ends a session whose
	// client leaves a transaction open, aborted or not, for longer.
	IdleInTransactionTimeout time.Duration
	// Logger receives GORM's lines (failing and slow statements);
	// slog.Default() when nil.
	Logger *slog.Logger
	// TracerProvider receives a span per statement (without its parameter
	// values) run under a recording span; the global provider when nil.
	TracerProvider trace.TracerProvider
	// ApplicationName is every session's application_name (see
	// ApplicationName), unless the URL sets one; the server's default when
	// empty.
	ApplicationName string
	// ReadOnly counts and logs the database refusing writes (ADR 0021);
	// share one between a process's pools. Nil: a watch of the pool's own,
	// logging to Logger, its counter unregistered.
	ReadOnly *ReadOnlyWatch
}

// ApplicationName names a session in pg_stat_activity as
// pin/<hostname>-<pid>/<role>, so an operator sees which instance, and
// which of its parts, holds a lock (docs/runbooks/outbox-backlog.md).
// PostgreSQL keeps 63 bytes of it: a long hostname is cut, the role kept.
func ApplicationName(role string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	instance := fmt.Sprintf("%s-%d", host, os.Getpid())
	if room := 63 - len("pin//") - len(role); len(instance) > room {
		instance = instance[len(instance)-max(room, 0):]
	}
	return "pin/" + instance + "/" + role
}

// API request budget (docs/adr/0005-hostile-input.md): the API's sessions
// give up on a lock after APILockTimeout and on a statement after
// APIStatementTimeout, well inside the HTTP handler timeout, so a locked
// table costs a request a few seconds and a connection no longer.
const (
	APIMaxOpenConns     = 12
	APILockTimeout      = 2 * time.Second
	APIStatementTimeout = 5 * time.Second
	// APIIdleInTransactionTimeout frees the rows of an API process frozen
	// inside a transaction; its statements run back to back (ADR 0014).
	APIIdleInTransactionTimeout = 5 * time.Second
	// BackgroundMaxOpenConns is the pool of the runners (expiry job, outbox
	// relay — one connection per topic, held —, consumers and cleaners) and
	// probes beside the API's.
	BackgroundMaxOpenConns = maxOpenConns - APIMaxOpenConns
)

// APIPool is the pool of the HTTP API.
var APIPool = PoolConfig{MaxOpenConns: APIMaxOpenConns, StatementTimeout: APIStatementTimeout, LockTimeout: APILockTimeout,
	IdleInTransactionTimeout: APIIdleInTransactionTimeout}

const (
	maxIdleConns = 10
)

// Open connects GORM to PostgreSQL through pgx and checks the connection.
//
// Every session runs with TimeZone=UTC, so that what the server itself does
// with times (a timestamptz as text, a date taken from now()) follows UTC,
// not the server's configured zone. GORM's prepared-statement cache is off:
// pgx already caches statements per connection. GORM logs only slow
// statements and errors, with their parameters left out; a statement run
// under a recording span gets a span of its own, without its parameters.
func Open(ctx context.Context, url string) (*gorm.DB, error) {
	return OpenPool(ctx, url, PoolConfig{})
}

// OpenPool is Open with the pool shaped by cfg; its timeouts are sent as
// session parameters when each connection starts, so they cost no round
// trip per request and hold for reads outside transactions too.
func OpenPool(ctx context.Context, url string, cfg PoolConfig) (*gorm.DB, error) {
	dsn, err := withSessionParams(url, cfg)
	if err != nil {
		return nil, err
	}
	connCfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse database URL: %w", err)
	}
	// A connection refused as read-only is counted and dropped before its
	// next use (ADR 0021): its replacement goes through
	// target_session_attrs to a writable host. While the database refuses
	// writes, such a pool leaves finding one to the watch's check (ADR 0031).
	readOnly := cfg.ReadOnly
	if readOnly == nil {
		readOnly = NewReadOnlyWatch(cfg.Logger, nil)
	}
	connCfg.OnPgError = readOnly.onPgError(connCfg.OnPgError)
	writableOnly := connCfg.ValidateConnect != nil
	connCfg.Tracer = multitracer.New(newTracer(cfg.TracerProvider), readOnly)
	// A cancelled context cancels the statement on the server (pgx's default
	// only closes the socket): a backend waiting on a lock does not notice
	// that its client is gone, and would hold its row locks until it got one.
	connCfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
	}
	readOnly.watchPool(connCfg)
	pool := sql.OpenDB(connector{Connector: stdlib.GetConnector(*connCfg, stdlib.OptionResetSession(readOnly.resetSession)),
		watch: readOnly, writableOnly: writableOnly})
	db, err := gorm.Open(gormpostgres.New(gormpostgres.Config{Conn: pool}), &gorm.Config{
		PrepareStmt:          false,
		DisableAutomaticPing: true,
		NowFunc:              func() time.Time { return time.Now().UTC() },
		Logger:               NewLogger(cmp.Or(cfg.Logger, slog.Default()), slowQuery),
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = maxOpenConns
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(min(maxIdleConns, cfg.MaxOpenConns))
	sqlDB.SetConnMaxLifetime(connMaxLifetime)
	sqlDB.SetConnMaxIdleTime(connMaxIdleTime)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", Redact(url), noWritableDatabase(err))
	}
	return db, nil
}

// withSessionParams adds jit=off and timezone=UTC (unless the connection
// string sets them already) and cfg's timeouts to a URL or keyword/value connection
// string; pgx sends parameters it does not know itself to the server.
func withSessionParams(dsn string, cfg PoolConfig) (string, error) {
	params := map[string]string{}
	// No JIT (ADR 0013): the service's statements are short, their estimated
	// cost swings past jit_above_cost with the statistics, and compiling
	// them costs more than running them.
	if !strings.Contains(strings.ToLower(dsn), "jit=") {
		params["jit"] = "off"
	}
	if !strings.Contains(strings.ToLower(dsn), "timezone=") {
		params["timezone"] = "UTC"
	}
	// A host that does not answer (a stopped VM, a dropped route) costs a
	// connection attempt connectTimeout, not the system's TCP timeout of
	// minutes; the URL or PGCONNECT_TIMEOUT may say otherwise (ADR 0031).
	if !strings.Contains(strings.ToLower(dsn), "connect_timeout=") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		params["connect_timeout"] = strconv.Itoa(int(connectTimeout.Seconds()))
	}
	if cfg.StatementTimeout > 0 {
		params["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	if cfg.LockTimeout > 0 {
		params["lock_timeout"] = strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10)
	}
	if cfg.IdleInTransactionTimeout > 0 {
		params["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.IdleInTransactionTimeout.Milliseconds(), 10)
	}
	if cfg.ApplicationName != "" && !strings.Contains(strings.ToLower(dsn), "application_name=") {
		params["application_name"] = cfg.ApplicationName
	}
	if len(params) == 0 {
		return dsn, nil
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// Only the query is rewritten: net/url cannot parse every host list
		// pgx can (postgres://[::1]:5432,[::2]:5432/db, ADR 0021).
		base, query, _ := strings.Cut(dsn, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return "", fmt.Errorf("postgres: parse database URL: %w", err)
		}
		for k, v := range params {
			q.Set(k, v)
		}
		return base + "?" + q.Encode(), nil
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		dsn += " " + k + "=" + params[k]
	}
	return strings.TrimSpace(dsn), nil
}

// Redact returns the database URL with its password replaced, for logs and
// error messages. It reads the URL's text rather than parsing it, so that a
// host list net/url refuses (postgres://u:pw@[::1]:5432,[::2]:5432/db)
// keeps its password out of a log too.
func Redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	authority := rest[:strings.IndexAny(rest+"/", "/?")]
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return dsn
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return dsn
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// IsUnavailable reports whether err means the server could not be reached
// at all (nothing listening, refused, DNS), as opposed to a failing query.
func IsUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr)
}

// IsTransient reports whether err means the database could not serve the
// statement now, though the same statement may succeed later: the server is
// unreachable or refuses connections, is shutting down or read-only
// (IsReadOnly), the connection broke (database/sql gives up with
// driver.ErrBadConn when its retries all meet broken ones, as after a
// failover), or a lock or statement timeout ended the statement. A caller
// answers 503 with Retry-After rather than 500.
func IsTransient(err error) bool {
	if IsUnavailable(err) || IsReadOnly(err) || isConnectionFault(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case pgErr.Code == "55P03", // lock_not_available: lock_timeout
		pgErr.Code == "57014",                                               // query_canceled: statement_timeout
		pgErr.Code == "53300",                                               // too_many_connections
		strings.HasPrefix(pgErr.Code, "08"),                                 // connection exception
		pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
		return true
	}
	return false
}

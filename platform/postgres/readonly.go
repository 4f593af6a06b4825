package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// sqlStateReadOnly is read_only_sql_transaction: a hot standby, a demoted
// or fenced primary (default_transaction_read_only) refusing a write.
const sqlStateReadOnly = "25006"

// IsReadOnly reports whether err is the database refusing to write: the
// session is read-only (SQLSTATE 25006), or a new connection found only
// servers that are (target_session_attrs=read-write). Writes can succeed
// again once a writable primary is reached (ADR 0021).
func IsReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == sqlStateReadOnly
	}
	return errors.Is(err, pgconn.ErrReadOnlyConnection)
}

// ReadOnlyWatch names an outage in which the database refuses writes. It
// counts every refusal in pin_database_read_only_refusals_total, logs the
// first of an episode at ERROR and its end (a writable session) once,
// whichever pool of the process saw them. One watch serves every pool of
// a process (PoolConfig.ReadOnly).
type ReadOnlyWatch struct {
	logger   *slog.Logger
	refusals prometheus.Counter
	// refusing is read by every statement's end (see TraceQueryEnd), hence
	// apart from mu.
	refusing atomic.Bool
	mu       sync.Mutex
	since    time.Time
	count    int
}

// NewReadOnlyWatch returns a watch that logs to logger (slog.Default()
// when nil) and registers its counter with reg, unless reg is nil.
func NewReadOnlyWatch(logger *slog.Logger, reg prometheus.Registerer) *ReadOnlyWatch {
	if logger == nil {
		logger = slog.Default()
	}
	w := &ReadOnlyWatch{logger: logger, refusals: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pin_database_read_only_refusals_total",
		Help: "Statements and new connections the database refused because it is read-only (SQLSTATE 25006, or target_session_attrs found no writable host); each refused connection is dropped.",
	})}
	if reg != nil {
		reg.MustRegister(w.refusals)
	}
	return w
}

// refused records one refusal, logging it if it opens an episode.
func (w *ReadOnlyWatch) refused(err error) {
	w.refusals.Inc()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count++
	if w.refusing.Load() {
		return
	}
	w.refusing.Store(true)
	w.since, w.count = time.Now(), 1
	// The cause is a standby, or a primary demoted or fenced; writes answer
	// 503 and refused connections are dropped until a writable one is found.
	w.logger.Error("postgres: the database refuses writes",
		"error", err.Error(), "runbook", "docs/runbooks/database-read-only.md")
}

// accepted ends an episode: a writable session answered.
func (w *ReadOnlyWatch) accepted() {
	if !w.refusing.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.refusing.Load() {
		return
	}
	w.refusing.Store(false)
	w.logger.Info("postgres: the database accepts writes again",
		"refused", w.count, "duration", time.Since(w.since).Round(time.Millisecond).String())
}

// refusedKey marks, in a connection's CustomData, that it met a read-only
// server.
const refusedKey = "pin.read_only"

// onPgError is pgconn's OnPgError of a pool: it counts a refusal and marks
// the connection for resetSession to drop. Closing it here instead would
// turn the refusal into driver.ErrBadConn for the caller's next statement
// in the same transaction (its rollback, a savepoint).
func (w *ReadOnlyWatch) onPgError(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(c *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code == sqlStateReadOnly {
			w.refused(pgErr)
			c.CustomData()[refusedKey] = true
		}
		return next == nil || next(c, pgErr)
	}
}

// resetSession is stdlib's ResetSession of a pool, run as database/sql
// hands out a connection again: one refused as read-only is dropped, so
// the pool makes a new one, which target_session_attrs=read-write takes to
// a writable host.
func resetSession(_ context.Context, conn *pgx.Conn) error {
	if conn.PgConn().CustomData()[refusedKey] == true {
		return driver.ErrBadConn
	}
	return nil
}

// validateConnect wraps a pool's ValidateConnect (target_session_attrs):
// a host found read-only is a refusal too.
func (w *ReadOnlyWatch) validateConnect(next pgconn.ValidateConnectFunc) pgconn.ValidateConnectFunc {
	if next == nil {
		return nil
	}
	return func(ctx context.Context, c *pgconn.PgConn) error {
		err := next(ctx, c)
		if errors.Is(err, pgconn.ErrReadOnlyConnection) {
			w.refused(err)
		}
		return err
	}
}

// TraceQueryStart implements pgx.QueryTracer; only the end matters.
func (w *ReadOnlyWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd ends an episode at the first statement that succeeds on
// a writable session, as PostgreSQL 14+ reports it (ParameterStatus of
// default_transaction_read_only and in_hot_standby): a writable primary is
// reached again.
func (w *ReadOnlyWatch) TraceQueryEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err != nil || !w.refusing.Load() {
		return
	}
	if c := conn.PgConn(); c.ParameterStatus("default_transaction_read_only") == "off" && c.ParameterStatus("in_hot_standby") != "on" {
		w.accepted()
	}
}

package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/backoff"
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
//
// During an episode it also holds writes back (AdmitWrite), and a pool
// that only takes writable hosts (target_session_attrs) makes no new
// connection: one check at a time, at most one per backoff wait, looks
// for a writable host instead, so an outage is answered at once and costs
// the database a connection a second, not one per request (ADR 0031).
type ReadOnlyWatch struct {
	logger   *slog.Logger
	refusals prometheus.Counter
	// refusing is read by every statement's end (see TraceQueryEnd) and
	// every write's admission, hence apart from mu.
	refusing atomic.Bool
	// begun counts the episodes begun: a statement that began before the
	// current one (in a transaction that began while writes were taken)
	// does not end it by succeeding.
	begun atomic.Int64
	// ends counts the episodes that ended; a session opened before the
	// last end may be on the server that refused, and is dropped.
	ends  atomic.Int64
	mu    sync.Mutex
	since time.Time
	count int
	// check connects as the pools do, to look for a writable host; nil
	// until a pool is opened with the watch.
	check *pgconn.Config
	// checking: a check is under way; nextCheck: the earliest the next may
	// start; waits space the checks of an episode.
	checking  bool
	nextCheck time.Time
	waits     *cenkalti.ExponentialBackOff
}

// The checks of an episode wait checkFirstWait, doubling up to
// checkMostWait, between them; each is bounded by checkTimeout whatever the
// URL's connect_timeout.
const (
	checkFirstWait = 50 * time.Millisecond
	checkMostWait  = time.Second
	checkTimeout   = 10 * time.Second
)

// errWritesHeld is AdmitWrite's answer, and a new connection's, while the
// database refuses writes: IsReadOnly and IsTransient recognise it.
var errWritesHeld = fmt.Errorf("postgres: writes are held back until a check finds a writable host: %w", pgconn.ErrReadOnlyConnection)

// NewReadOnlyWatch returns a watch that logs to logger (slog.Default()
// when nil) and registers its counter with reg, unless reg is nil.
func NewReadOnlyWatch(logger *slog.Logger, reg prometheus.Registerer) *ReadOnlyWatch {
	if logger == nil {
		logger = slog.Default()
	}
	w := &ReadOnlyWatch{logger: logger, waits: backoff.Doubling(checkFirstWait, checkMostWait),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pin_database_read_only_refusals_total",
			Help: "Statements and new connections the database refused because it is read-only (SQLSTATE 25006, or target_session_attrs found no writable host), and writes and connections held back while it does; each refused connection is dropped.",
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
	w.begun.Add(1)
	w.refusing.Store(true)
	w.since, w.count = time.Now(), 1
	w.waits.Reset()
	w.nextCheck = w.since.Add(w.waits.NextBackOff())
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
	// ends first: a write admitted once refusing is off must find every
	// session opened before marked for dropping.
	w.ends.Add(1)
	w.refusing.Store(false)
	w.logger.Info("postgres: the database accepts writes again",
		"refused", w.count, "duration", time.Since(w.since).Round(time.Millisecond).String())
}

// AdmitWrite is nil unless an episode is on; then it counts a refusal,
// starts a check for a writable host when one is due, and answers with an
// error IsReadOnly recognises at once, without a round trip: the HTTP
// server's write gate (httpserver.Config.AdmitWrite).
func (w *ReadOnlyWatch) AdmitWrite() error {
	if !w.refusing.Load() {
		return nil
	}
	return w.holdBack()
}

// holdBack counts a write or connection held back during an episode and
// starts a check when one is due. It answers nil if the episode has just
// ended.
func (w *ReadOnlyWatch) holdBack() error {
	w.mu.Lock()
	if !w.refusing.Load() {
		w.mu.Unlock()
		return nil
	}
	w.refusals.Inc()
	w.count++
	due := w.check != nil && !w.checking && !time.Now().Before(w.nextCheck)
	w.checking = w.checking || due
	w.mu.Unlock()
	if due {
		go w.checkWritable()
	}
	return errWritesHeld
}

// checkWritable connects once as the pools do and ends the episode when
// the session it gets takes writes; otherwise the next check waits longer.
// It runs apart from any request, so no request waits for a connection.
func (w *ReadOnlyWatch) checkWritable() {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	err := writableHost(ctx, w.check)
	w.mu.Lock()
	w.checking = false
	w.nextCheck = time.Now().Add(w.waits.NextBackOff())
	w.mu.Unlock()
	if err == nil {
		w.accepted()
	}
}

// writableHost connects with cfg (its host list and target_session_attrs)
// and asks the session it gets whether it takes writes.
func writableHost(ctx context.Context, cfg *pgconn.Config) error {
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	res := conn.ExecParams(ctx, "SHOW transaction_read_only", nil, nil, nil, nil).Read()
	switch {
	case res.Err != nil:
		return res.Err
	case len(res.Rows) != 1 || string(res.Rows[0][0]) != "off":
		return pgconn.ErrReadOnlyConnection
	}
	return nil
}

// watchPool takes cfg, a pool's connection settings, for the checks (the
// first pool's: a process's pools share one URL) and marks the pool's
// sessions with the episode they were opened in.
func (w *ReadOnlyWatch) watchPool(cfg *pgx.ConnConfig) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		c.CustomData()[openedKey] = w.ends.Load()
		if next == nil {
			return nil
		}
		return next(ctx, c)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.check == nil {
		w.check = cfg.Config.Copy()
	}
}

// connector is a pool's way to the database during an episode: a pool
// that takes only writable hosts (target_session_attrs) could not connect
// anyway, so it does not try; the watch's check looks for a writable host
// instead, at a bounded rate, and the caller's error is the refusal's.
type connector struct {
	driver.Connector
	watch *ReadOnlyWatch
	// writableOnly: the pool's URL sets target_session_attrs.
	writableOnly bool
}

// Connect connects, unless the watch holds the pool's connections back. A
// connection that found no writable host is a refusal; one host refusing
// is not, when another of the list takes writes.
func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.writableOnly && c.watch.refusing.Load() {
		if err := c.watch.holdBack(); err != nil {
			return nil, err
		}
	}
	conn, err := c.Connector.Connect(ctx)
	if IsReadOnly(err) {
		c.watch.refused(err)
	}
	return conn, err
}

// refusedKey marks, in a connection's CustomData, that it met a read-only
// server.
const refusedKey = "pin.read_only"

// openedKey holds, in a connection's CustomData, how many episodes had
// ended when it was opened.
const openedKey = "pin.opened_after_ends"

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
// a writable host. So is one opened before the last episode ended: it may
// be on the server that refused, which would refuse its next write and
// open another episode.
func (w *ReadOnlyWatch) resetSession(_ context.Context, conn *pgx.Conn) error {
	data := conn.PgConn().CustomData()
	if opened, _ := data[openedKey].(int64); data[refusedKey] == true || opened < w.ends.Load() {
		return driver.ErrBadConn
	}
	return nil
}

// episodeAtStart is the context key of the episodes begun when a
// statement started.
type episodeAtStart struct{}

// TraceQueryStart implements pgx.QueryTracer: it notes how many episodes
// had begun when the statement started.
func (w *ReadOnlyWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, episodeAtStart{}, w.begun.Load())
}

// TraceQueryEnd ends an episode at the first statement started during it
// that succeeds on a writable session, as PostgreSQL 14+ reports it
// (ParameterStatus of default_transaction_read_only and in_hot_standby): a
// writable primary is reached again. A statement already running when the
// episode began may succeed on a session the server has not switched yet.
func (w *ReadOnlyWatch) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err != nil || !w.refusing.Load() {
		return
	}
	if started, _ := ctx.Value(episodeAtStart{}).(int64); started != w.begun.Load() {
		return
	}
	if c := conn.PgConn(); c.ParameterStatus("default_transaction_read_only") == "off" && c.ParameterStatus("in_hot_standby") != "on" {
		w.accepted()
	}
}

package relay

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// Leadership of a topic is a PostgreSQL session advisory lock: it lasts as
// long as the session, and the relay acknowledges rows only on that session,
// so a relay that lost its session cannot acknowledge anything. The server
// ends a session that stays silent (a crash, a cut link, a frozen process)
// and so hands the lead on. docs/adr/0008-outbox-relay.md, decision 4.

// openSession sets up conn as a lock session. The server drops it when the
// client stops answering: within seconds when its kernel is gone (TCP
// keepalives), and after SessionTimeout without a statement when the
// process is frozen but its kernel still answers (idle timeouts). An
// acknowledgement lost in a server crash only means the rows are sent
// again: it need not wait for the WAL flush. Its read and acknowledgement
// are planned once, as store.PlanAsTheRelay says.
func (r *Relay) openSession(ctx context.Context, conn *sql.Conn) error {
	_, err := r.exec(ctx, conn, `SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1;
		SET tcp_keepalives_count = 2; SET tcp_user_timeout = 4000; SET synchronous_commit = off`)
	if err != nil {
		return fmt.Errorf("relay session: %w", err)
	}
	stmt, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	if err := store.PlanAsTheRelay(stmt, conn); err != nil {
		return fmt.Errorf("relay session: %w", err)
	}
	ms := fmt.Sprint(r.cfg.SessionTimeout.Milliseconds())
	_, err = conn.ExecContext(stmt, `SELECT set_config('idle_session_timeout', $1, false),
		set_config('idle_in_transaction_session_timeout', $1, false)`, ms)
	if err != nil {
		return fmt.Errorf("relay session: %w", err)
	}
	if r.cfg.ApplicationName != "" {
		// The session is closed after this term (discard), so the name never
		// reaches another user of the pool.
		if _, err := conn.ExecContext(stmt, `SELECT set_config('application_name', $1, false)`, r.cfg.ApplicationName); err != nil {
			return fmt.Errorf("relay session: %w", err)
		}
	}
	return nil
}

// awaitLock returns once this session holds topic's advisory lock. It polls
// with pg_try_advisory_lock rather than waiting in pg_advisory_lock: a
// waiting statement would hold a snapshot, and the cluster's vacuum horizon
// with it, for as long as this instance stands by. Each try also keeps the
// standby's session inside SessionTimeout.
func (r *Relay) awaitLock(ctx context.Context, conn *sql.Conn, topic string) error {
	for {
		var held bool
		stmt, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
		err := conn.QueryRowContext(stmt, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, lockName(topic)).Scan(&held)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("advisory lock of %s: %w", topic, err)
		case held:
			return nil
		case !sleep(ctx, r.cfg.LockRetryInterval):
			return ctx.Err()
		}
	}
}

// heartbeat is how often the active relay shows the server that it is
// alive while it waits for something else than the database.
func (r *Relay) heartbeat() time.Duration { return r.cfg.SessionTimeout / 5 }

// whileLeading runs f, which waits for something else than the database
// (Kafka), while it pings the lock session every heartbeat: a slow broker
// keeps the lead, a frozen process loses it. f's context ends, with the
// ping's error as its cause, once a ping failed: the session and the lead
// are gone, and f should stop sending.
func (r *Relay) whileLeading(ctx context.Context, session execer, f func(context.Context)) {
	fctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(r.heartbeat())
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				// Not cancelled when f returns: a cancelled statement can cost
				// its connection (postgres.OpenPool), and this one holds the lock.
				if _, err := r.exec(context.WithoutCancel(ctx), session, `SELECT 1`); err != nil {
					lost(fmt.Errorf("lost the lead: %w", err))
					return
				}
			}
		}
	}()
	f(fctx)
	close(done)
	<-stopped
}

// lockName is the text hashed into topic's advisory lock key; operators find
// the holder with it (docs/runbooks/outbox-backlog.md).
func lockName(topic string) string { return "pin outbox relay " + topic }

// execer is the lock session, in a transaction (*sql.Tx) or not (*sql.Conn).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (r *Relay) exec(ctx context.Context, session execer, query string) (sql.Result, error) {
	stmt, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	return session.ExecContext(stmt, query)
}

// discard closes conn's session instead of returning it to the pool: it may
// hold the relay's advisory lock.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

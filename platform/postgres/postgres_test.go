package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// outboxTable stands for an outbox table: written through the executor
// (tx.ExecContext) as the outbox writes, beside GORM's writes.
const outboxTable = `outbox_rows`

type testBundle struct {
	db  *testbed.Database
	ctx context.Context
}

func setup(tb testing.TB) testBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	_, err := db.SQL.Exec(`CREATE TABLE items (id int PRIMARY KEY, xid xid8 NOT NULL DEFAULT pg_current_xact_id())`)
	require.NoError(tb, err)
	_, err = db.SQL.Exec(`CREATE TABLE ` + outboxTable + ` (uuid text NOT NULL, payload json, metadata json,
		transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id())`)
	require.NoError(tb, err)
	return testBundle{db: db, ctx: context.Background()}
}

func (b testBundle) count(tb testing.TB, table string) int {
	tb.Helper()
	var n int
	require.NoError(tb, b.db.SQL.QueryRow("SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// insertOutbox writes an outbox row the way watermill-sql's publisher does:
// through the executor, stamped with the current transaction id.
func insertOutbox(ctx context.Context, tx postgres.Tx) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO `+outboxTable+` (uuid, payload, metadata) VALUES ($1, $2, $3)`,
		"00000000-0000-0000-0000-000000000001", []byte(`{}`), []byte(`{}`))
	return err
}

func TestInTxCommits(t *testing.T) {
	t.Parallel()
	b := setup(t)

	err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		if err := tx.GORM().Exec("INSERT INTO items (id) VALUES (1)").Error; err != nil {
			return err
		}
		return insertOutbox(b.ctx, tx)
	})
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, "items"))
	require.Equal(t, 1, b.count(t, outboxTable))

	// Both writes carry the same transaction id: one transaction, two views.
	var same bool
	require.NoError(t, b.db.SQL.QueryRow(
		`SELECT (SELECT xid FROM items) = (SELECT transaction_id FROM `+outboxTable+`)`).Scan(&same))
	require.True(t, same)
}

func TestInTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("boom")

	err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		require.NoError(t, tx.GORM().Exec("INSERT INTO items (id) VALUES (1)").Error)
		require.NoError(t, insertOutbox(b.ctx, tx))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, b.count(t, "items"))
	require.Zero(t, b.count(t, outboxTable), "the outbox row must roll back with the change")
}

func TestInTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	b := setup(t)

	require.Panics(t, func() {
		_ = postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			require.NoError(t, insertOutbox(b.ctx, tx))
			panic("boom")
		})
	})
	require.Zero(t, b.count(t, outboxTable))
}

// The zero Tx is in no transaction: it runs nothing, so no write can land
// outside the caller's transaction.
func TestZeroTxRunsNothing(t *testing.T) {
	t.Parallel()
	var tx postgres.Tx
	require.False(t, tx.Valid())
	_, err := tx.ExecContext(context.Background(), "SELECT 1")
	require.ErrorContains(t, err, "not in a transaction")
	_, err = tx.QueryContext(context.Background(), "SELECT 1")
	require.ErrorContains(t, err, "not in a transaction")
}

func TestInTxWithPreparedStatements(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prepared := b.db.Gorm.Session(&gorm.Session{PrepareStmt: true})

	err := postgres.InTx(b.ctx, prepared, func(tx postgres.Tx) error {
		_, isPrepared := tx.GORM().Statement.ConnPool.(*gorm.PreparedStmtTX)
		require.True(t, isPrepared, "GORM wraps the transaction when PrepareStmt is on")
		if err := tx.GORM().Exec("INSERT INTO items (id) VALUES (1)").Error; err != nil {
			return err
		}
		return insertOutbox(b.ctx, tx)
	})
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, outboxTable))

	err = postgres.InTx(b.ctx, prepared, func(tx postgres.Tx) error {
		require.NoError(t, tx.GORM().Exec("INSERT INTO items (id) VALUES (2)").Error)
		require.NoError(t, insertOutbox(b.ctx, tx))
		return errors.New("roll back")
	})
	require.Error(t, err)
	require.Equal(t, 1, b.count(t, "items"))
	require.Equal(t, 1, b.count(t, outboxTable))
}

func TestOpenUsesUTC(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var tz string
	require.NoError(t, b.db.SQL.QueryRow("SHOW TimeZone").Scan(&tz))
	require.Equal(t, "UTC", tz)
	require.Equal(t, time.UTC, b.db.Gorm.NowFunc().Location())
}

// Every pool's sessions run without JIT (ADR 0013), the API's too, whatever
// the server's jit.
func TestOpenTurnsJITOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	api, err := postgres.OpenPool(context.Background(), b.db.URL, postgres.APIPool)
	require.NoError(t, err)
	t.Cleanup(func() {
		if sqlDB, err := api.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	for _, db := range []*gorm.DB{b.db.Gorm, api} {
		var jit string
		require.NoError(t, db.Raw("SHOW jit").Scan(&jit).Error)
		require.Equal(t, "off", jit)
	}
}

func TestOpenFailsWhenUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := postgres.Open(ctx, "postgres://postgres:secret@127.0.0.1:1/pin?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, postgres.IsUnavailable(err), "%v", err)
	require.NotContains(t, err.Error(), "secret")
}

// TestConnectGivesUpOnASilentHost (ADR 0031): a host that takes the TCP
// connection and never answers (a paused VM) costs a connection attempt
// connect_timeout, 2 s unless the URL sets it, not the caller's deadline.
func TestConnectGivesUpOnASilentHost(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never answered
		}
	}()
	for _, tc := range []struct {
		query string
		want  time.Duration
	}{{"sslmode=disable", 2 * time.Second}, {"sslmode=disable&connect_timeout=1", time.Second}} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		start := time.Now()
		_, err := postgres.Open(ctx, "postgres://postgres@"+silent.Addr().String()+"/pin?"+tc.query)
		took := time.Since(start)
		cancel()
		require.Error(t, err, tc.query)
		require.True(t, postgres.IsUnavailable(err), "%v", err)
		require.GreaterOrEqual(t, took, tc.want, tc.query)
		require.Less(t, took, tc.want+3*time.Second, "%s: gave up after %s", tc.query, took)
	}
}

func TestMigrationsEnsureDatabaseAndReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A database of its own, created by EnsureDatabase rather than the
	// testbed, so that it starts empty.
	base, err := url.Parse(testbed.BaseURL())
	require.NoError(t, err)
	name := fmt.Sprintf("pin_test_ensure_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", testbed.BaseURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)")
		_ = admin.Close()
	})
	u := *base
	u.Path = "/" + name

	require.NoError(t, postgres.EnsureDatabase(ctx, u.String()))
	require.NoError(t, postgres.EnsureDatabase(ctx, u.String()), "idempotent")

	gdb, err := postgres.Open(ctx, u.String())
	require.NoError(t, err)
	db, err := gdb.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	requireNotReady(t, postgres.Ready(ctx, db), postgres.ReasonMigrationsPending)
	require.NoError(t, postgres.Migrate(ctx, db))
	require.NoError(t, postgres.Migrate(ctx, db), "idempotent")
	require.NoError(t, postgres.Ready(ctx, db))

	p, err := postgres.MigrationProvider(db)
	require.NoError(t, err)
	status, err := p.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)

	// Down all the way and up again: every Down section works.
	_, err = p.DownTo(ctx, 0)
	require.NoError(t, err)
	requireNotReady(t, postgres.Ready(ctx, db), postgres.ReasonMigrationsPending)
	require.NoError(t, postgres.Migrate(ctx, db))
	require.NoError(t, postgres.Ready(ctx, db))
}

func TestLoggerWritesNoParameterValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer // GORM logs in the calling goroutine
	db := b.db.Gorm.Session(&gorm.Session{
		Logger: postgres.NewLogger(slog.New(slog.NewJSONHandler(&logs, nil)), time.Millisecond),
	})
	const secret = "cancel-reason-of-user-42"

	err := db.Exec("SELECT ?::text || (1/0)::text", secret).Error
	require.Error(t, err, "division by zero")
	var out string // Scan logs through GORM's recorder, a path of its own
	err = db.Raw("SELECT ?::text FROM pg_sleep(0.02)", secret).Scan(&out).Error
	require.NoError(t, err)

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2, "one failing and one slow statement: %s", logs.String())
	require.Contains(t, lines[0], "division by zero")
	require.Contains(t, lines[1], "pg_sleep")
	for _, line := range lines {
		require.Contains(t, line, "$1", "the statement is logged with its placeholder")
		require.NotContains(t, line, secret, "but not with its value")
	}
}

func TestReadyOnAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", "postgres://pin_owner:secret@127.0.0.1:1/pin?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	requireNotReady(t, postgres.Ready(context.Background(), db), postgres.ReasonUnreachable)
}

func requireNotReady(t *testing.T, err error, reason string) {
	t.Helper()
	var notReady *postgres.NotReadyError
	require.ErrorAs(t, err, &notReady)
	require.Equal(t, reason, notReady.ReadyReason())
}

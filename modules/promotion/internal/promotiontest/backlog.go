package promotiontest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// seedBacklog builds the table with three set-based statements, never row
// by row. Row i (1-based) is:
//
//   - i <= due: Active, EndsAt between 1 hour and 1h + due seconds before
//     asOf (the backlog);
//   - the next min(due, rest) rows: Active, EndsAt a day or more after asOf
//     (running promotions, in the partial index but not due);
//   - the rest: history, Expired (9 in 10) or Cancelled, EndsAt a month or
//     more before asOf — outside the partial index, as in production.
//
// Every purchase has 1 to 3 targets. Ids grow with i, as the module's
// time-ordered UUIDv7 ids grow with time, so that the primary keys are
// appended to rather than written at random places (several times slower to
// load: docs/performance.md).
const seedBacklog = `
WITH src AS (
	SELECT i, ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id,
		CASE WHEN i <= $2::int + $3::int THEN 'Active' WHEN i % 10 = 0 THEN 'Cancelled' ELSE 'Expired' END AS status,
		CASE WHEN i <= $2::int THEN $4::timestamptz - interval '1 hour' - i * interval '1 second'
			WHEN i <= $2::int + $3::int THEN $4::timestamptz + interval '1 day' + i * interval '1 second'
			ELSE $4::timestamptz - interval '30 days' - i * interval '1 second' END AS ends_at
	FROM generate_series(1, $1::int) AS i
), purchases AS (
	INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
		boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign,
		status, payment_status, starts_at, ends_at, cancel_reason, created_by_user_id, updated_by_user_id,
		created_at, updated_at, version)
	SELECT id, md5('tenant-' || i % 500)::uuid, $5::uuid, 'project-boost-week', 'ProjectBoost',
		10, 1500.00, 643, 'RUB', 'Российский рубль', '₽',
		status, 'NotRequired', ends_at - interval '7 days', ends_at,
		CASE WHEN status = 'Cancelled' THEN 'benchmark history' END, md5('user-' || i % 5000)::uuid, NULL,
		ends_at - interval '7 days',
		CASE WHEN status = 'Active' THEN ends_at - interval '7 days' ELSE ends_at END,
		CASE WHEN status = 'Active' THEN 1 ELSE 2 END
	FROM src
)
INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
SELECT src.id, 'Project', ('00000000-0000-4000-a000-' || lpad(to_hex(src.i * 3 + pos), 12, '0'))::uuid, pos
FROM src, generate_series(0, 2) AS pos
WHERE pos <= src.i % 3`

// SeedBacklog fills db's purchases and targets tables with total purchases
// (seedBacklog), due of them due as of asOf, in one transaction with the
// secondary indexes built after the load, as a restore does. It neither
// vacuums nor analyzes: the tables are left without statistics. It
// returns the id of the one package every purchase is of.
func SeedBacklog(tb testing.TB, db *testbed.Database, total, due int, asOf time.Time) uuid.UUID {
	tb.Helper()
	ctx := context.Background()
	notDue := min(due, total-due)
	pkg := uuid.New()
	err := postgres.InTx(ctx, db.Gorm, func(tx postgres.Tx) error {
		indexes, err := dropSecondaryIndexes(ctx, tx)
		if err != nil {
			return err
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			// Foreign-key triggers are off for the load: the rows are
			// consistent by construction.
			{`SET LOCAL session_replication_role = replica`, nil},
			{`SET LOCAL maintenance_work_mem = '256MB'`, nil},
			{`INSERT INTO promotion.promotion_packages (id, code, name, kind, duration_days, boost_weight,
				price_amount, currency_id, is_active, created_at, updated_at)
			VALUES ($1, 'project-boost-week', 'Project boost, a week', 'ProjectBoost', 7, 10, 1500.00, 643, true, now(), now())`,
				[]any{pkg}},
			{seedBacklog, []any{total, due, notDue, asOf, pkg}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
		for _, def := range indexes {
			if _, err := tx.ExecContext(ctx, def); err != nil {
				return fmt.Errorf("seed: %s: %w", def, err)
			}
		}
		return nil
	})
	require.NoError(tb, err)
	return pkg
}

// dropSecondaryIndexes drops the indexes of the purchases and targets
// tables that back no constraint (the migration's own definitions are
// returned, to be created again after the load: one sorted build is much
// cheaper than a million random inserts). Primary keys and unique
// constraints stay.
func dropSecondaryIndexes(ctx context.Context, tx postgres.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), pg_get_indexdef(i.indexrelid)
	FROM pg_index AS i
	JOIN pg_class AS c ON c.oid = i.indexrelid
	JOIN pg_namespace AS n ON n.oid = c.relnamespace
	WHERE i.indrelid IN ('promotion.promotion_purchases'::regclass, 'promotion.promotion_purchase_targets'::regclass)
		AND NOT EXISTS (SELECT 1 FROM pg_constraint AS k WHERE k.conindid = i.indexrelid)`)
	if err != nil {
		return nil, fmt.Errorf("seed: list indexes: %w", err)
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("seed: list indexes: %w", err)
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("seed: list indexes: %w", err)
	}
	for _, name := range names {
		if _, err := tx.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	return defs, nil
}

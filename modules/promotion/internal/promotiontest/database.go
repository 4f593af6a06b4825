package promotiontest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/testbed"
)

// Package is a promotion package row as InsertPackage stores it. Purchases
// inserted for it copy its code, kind, weight and price, as a purchase
// does when it is made.
type Package struct {
	ID           uuid.UUID
	Code         string
	Name         string
	Kind         domain.PackageKind
	DurationDays int
	BoostWeight  int
	Price        decimal.Decimal
}

// InsertPackage stores an active RUB package and returns it with its id
// (a fresh one when p.ID is nil).
func InsertPackage(tb testing.TB, db *testbed.Database, p Package) Package {
	tb.Helper()
	if p.ID == uuid.Nil {
		p.ID = uuid.New()
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := db.SQL.ExecContext(context.Background(), `INSERT INTO promotion.promotion_packages
		(id, code, name, kind, duration_days, boost_weight, price_amount, currency_id, is_active, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true, $9, $9)`,
		p.ID, p.Code, p.Name, string(p.Kind), p.DurationDays, p.BoostWeight, p.Price.String(), domain.CurrencyIDRUB, now)
	require.NoError(tb, err)
	return p
}

// Purchases shapes the purchases InsertPurchases stores.
type Purchases struct {
	Status    domain.Status // Active when empty
	Targets   int           // targets per purchase; 1 when 0
	EndsAt    time.Time     // a week from now when zero
	CreatedAt time.Time     // created_at and updated_at; now when zero
	// UnknownLastEvent stores no last event (last_event_id NULL), as for a
	// purchase whose event left the outbox before migration 00008; else
	// each keeps a random messageId at its updated_at, as if published.
	UnknownLastEvent bool
}

// InsertPurchases stores n purchases of pkg with their targets (of the
// kind pkg admits) in two statements, as a repository would store them:
// a backlog of a thousand through the use case's transactions would be too
// slow. Each runs the package's duration and ends at spec.EndsAt; an
// Expired or Cancelled one is at version 2 (a Cancelled one with a
// reason), an Active one at version 1. The ids come back in insertion
// order. No event is written to the outbox.
func InsertPurchases(tb testing.TB, db *testbed.Database, pkg Package, n int, spec Purchases) []uuid.UUID {
	tb.Helper()
	if spec.Status == "" {
		spec.Status = domain.StatusActive
	}
	if spec.Targets == 0 {
		spec.Targets = 1
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if spec.EndsAt.IsZero() {
		spec.EndsAt = now.Add(7 * 24 * time.Hour)
	}
	if spec.CreatedAt.IsZero() {
		spec.CreatedAt = now
	}
	targetKind, ok := pkg.Kind.AdmittedTargetKind()
	require.True(tb, ok, "package kind %q admits no target kind", pkg.Kind)
	var version int64 = 1
	var reason *string
	switch spec.Status {
	case domain.StatusCancelled:
		r := "test"
		reason = &r
		version = 2
	case domain.StatusExpired:
		version = 2
	}
	ids, tenants, buyers := make([]string, n), make([]string, n), make([]string, n)
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.New()
		ids[i], tenants[i], buyers[i] = out[i].String(), uuid.NewString(), uuid.NewString()
	}
	ctx := context.Background()
	_, err := db.SQL.ExecContext(ctx, `INSERT INTO promotion.promotion_purchases
		(id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		 currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		 cancel_reason, created_by_user_id, created_at, updated_at, version, last_event_id, last_event_at)
		SELECT u.id, u.tenant_id, $4::uuid, $5::text, $6::text, $7::integer, $8::numeric, $9::smallint,
			$10::text, $11::text, $12::text, $13::text, $14::text, $15::timestamptz, $16::timestamptz, $17::text,
			u.created_by, $18::timestamptz, $18::timestamptz, $19::bigint,
			CASE WHEN NOT $20::boolean THEN gen_random_uuid() END, CASE WHEN NOT $20::boolean THEN $18::timestamptz END
		FROM unnest($1::uuid[], $2::uuid[], $3::uuid[]) AS u(id, tenant_id, created_by)`,
		ids, tenants, buyers,
		pkg.ID, pkg.Code, string(pkg.Kind), pkg.BoostWeight, pkg.Price.String(), domain.CurrencyIDRUB,
		domain.RUB.IsoCode, domain.RUB.Name, domain.RUB.Sign, string(spec.Status), string(domain.PaymentNotRequired),
		spec.EndsAt.Add(-time.Duration(pkg.DurationDays)*24*time.Hour), spec.EndsAt, reason,
		spec.CreatedAt, version, spec.UnknownLastEvent)
	require.NoError(tb, err)
	_, err = db.SQL.ExecContext(ctx, `INSERT INTO promotion.promotion_purchase_targets
		(purchase_id, target_kind, target_id, position)
		SELECT u.id, $2::text, gen_random_uuid(), g.position
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n), generate_series(0, $3::integer - 1) AS g(position)
		ORDER BY u.n, g.position`, ids, string(targetKind), spec.Targets)
	require.NoError(tb, err)
	return out
}

// MakeDue moves the purchases' periods into the past as a whole (each keeps
// its length), so that they ended ago before now.
func MakeDue(tb testing.TB, db *testbed.Database, ago time.Duration, ids ...uuid.UUID) {
	tb.Helper()
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	_, err := db.SQL.ExecContext(context.Background(), `UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - (ends_at - $2::timestamptz), ends_at = $2::timestamptz
		WHERE id = ANY($1::uuid[])`, strs, time.Now().UTC().Add(-ago))
	require.NoError(tb, err)
}

// InsertDue stores n Active purchases of pkg, one target each, that ended
// an hour ago: the expiry job's backlog.
func InsertDue(tb testing.TB, db *testbed.Database, pkg Package, n int) []uuid.UUID {
	tb.Helper()
	ids := InsertPurchases(tb, db, pkg, n, Purchases{})
	MakeDue(tb, db, time.Hour, ids...)
	return ids
}

// StatusCounts counts the purchases by status.
func StatusCounts(tb testing.TB, db *testbed.Database) map[string]int {
	tb.Helper()
	rows, err := db.SQL.QueryContext(context.Background(),
		`SELECT status, count(*) FROM promotion.promotion_purchases GROUP BY status`)
	require.NoError(tb, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(tb, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(tb, rows.Err())
	return out
}

// Count runs a SELECT count(*) ... query.
func Count(tb testing.TB, db *testbed.Database, query string, args ...any) int {
	tb.Helper()
	var n int
	require.NoError(tb, db.SQL.QueryRowContext(context.Background(), query, args...).Scan(&n))
	return n
}

// Exec runs statements on the test database, one after the other.
func Exec(tb testing.TB, db *testbed.Database, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		_, err := db.SQL.ExecContext(context.Background(), s)
		require.NoError(tb, err, s)
	}
}

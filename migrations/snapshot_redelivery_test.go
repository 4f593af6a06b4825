package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestSnapshotRedeliveryBackfillsTheLastEventFromTheOutbox: 00008 gives a
// purchase the messageId and occurredAt of its last transition's event
// where the outbox still holds it — not an earlier snapshot's row at the
// same version, not an older version's — and leaves NULL (a snapshot skips
// the purchase, ADR 0012) where it does not, or where the row does not parse. Reverted, the
// columns and promotion.snapshot_runs are gone; re-applied, the same.
func TestSnapshotRedeliveryBackfillsTheLastEventFromTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 7)
	require.NoError(t, err)

	pkg := uuid.New()
	_, err = db.SQL.Exec(`INSERT INTO promotion.promotion_packages (id, code, name, kind, duration_days, boost_weight,
		price_amount, currency_id, created_at, updated_at) VALUES ($1, 'backfill', 'Backfill', 'ProjectBoost', 7, 10, 100, 643, now(), now())`, pkg)
	require.NoError(t, err)
	cancelled, gone, garbled := uuid.New(), uuid.New(), uuid.New()
	for id, status := range map[uuid.UUID]string{cancelled: "Cancelled", gone: "Active", garbled: "Active"} {
		version, reason := 1, sql.NullString{}
		if status == "Cancelled" {
			version, reason = 2, sql.NullString{String: "test", Valid: true}
		}
		_, err = db.SQL.Exec(`INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
			boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign, status, payment_status,
			starts_at, ends_at, cancel_reason, created_by_user_id, created_at, updated_at, version)
			VALUES ($1, $2, $3, 'backfill', 'ProjectBoost', 10, 100, 643, 'RUB', 'Российский рубль', '₽', $4, 'NotRequired',
			now(), now() + interval '7 days', $5, $2, now(), now(), $6)`, id, uuid.New(), pkg, status, reason, version)
		require.NoError(t, err)
	}
	activeEvent, snapshotEvent, cancelEvent := uuid.New(), uuid.New(), uuid.New()
	cancelledAt := "2026-11-30T10:00:00.123456Z"
	outboxRow := func(messageID, purchase string, version int, occurredAt, origin string) {
		t.Helper()
		metadata := fmt.Sprintf(`{"partition_key": %q, "message_id": %q}`, purchase, messageID)
		if origin != "" {
			metadata = fmt.Sprintf(`{"partition_key": %q, "message_id": %q, "event_origin": %q}`, purchase, messageID, origin)
		}
		_, err := db.SQL.Exec(`INSERT INTO outbox.pin_promotion_purchase_changed_v1 (uuid, payload, metadata, acked)
			VALUES ($1, $2, $3, true)`, messageID,
			fmt.Sprintf(`{"messageId": %q, "occurredAt": %q, "payload": {"purchaseId": %q, "version": %d}}`, messageID, occurredAt, purchase, version),
			metadata)
		require.NoError(t, err)
	}
	outboxRow(activeEvent.String(), cancelled.String(), 1, "2026-11-23T10:00:00Z", "")
	outboxRow(snapshotEvent.String(), cancelled.String(), 2, "2026-11-29T10:00:00Z", "snapshot") // an old snapshot's invention
	outboxRow(cancelEvent.String(), cancelled.String(), 2, cancelledAt, "transition")
	outboxRow("not-a-uuid", garbled.String(), 1, "2026-11-23T10:00:00Z", "")

	_, err = goose.UpTo(ctx, 8)
	require.NoError(t, err)
	last := func(id uuid.UUID) (uuid.NullUUID, sql.NullTime) {
		var eventID uuid.NullUUID
		var at sql.NullTime
		require.NoError(t, db.SQL.QueryRow(`SELECT last_event_id, last_event_at FROM promotion.promotion_purchases WHERE id = $1`, id).
			Scan(&eventID, &at))
		return eventID, at
	}
	eventID, at := last(cancelled)
	require.Equal(t, uuid.NullUUID{UUID: cancelEvent, Valid: true}, eventID, "the Cancelled transition's event")
	want, err := time.Parse(time.RFC3339Nano, cancelledAt)
	require.NoError(t, err)
	require.True(t, at.Valid && at.Time.Equal(want), "its occurredAt: %v", at)
	for _, id := range []uuid.UUID{gone, garbled} {
		eventID, at := last(id)
		require.False(t, eventID.Valid || at.Valid, "no event to take: left NULL")
	}

	_, err = goose.DownTo(ctx, 7)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM information_schema.columns
		WHERE table_schema = 'promotion' AND table_name = 'promotion_purchases' AND column_name LIKE 'last_event%'`).Scan(&n))
	require.Zero(t, n)
	_, err = goose.UpTo(ctx, 8)
	require.NoError(t, err)
	eventID, _ = last(cancelled)
	require.Equal(t, cancelEvent, eventID.UUID)
}

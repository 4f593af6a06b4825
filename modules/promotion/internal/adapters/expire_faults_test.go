package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
)

// A fault of the database is the batch's, never a row's: a
// trigger raises each SQLSTATE on the UPDATE of one of five due purchases.
// Only a data exception (22) or an integrity constraint violation (23) of
// that row's own statement makes it poison; any other class rolls the whole
// batch back, remembers no poison, and fails the cycle once.
func TestExpireFaultClassByRealStatement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sqlstate string
		rowFault bool
	}{
		{"42501", false}, // insufficient_privilege
		{"42P01", false}, // undefined_table
		{"55P03", false}, // lock_not_available
		{"57014", false}, // query_canceled (statement_timeout)
		{"P0001", false}, // a trigger's RAISE without a data class
		{"23514", true},  // check_violation
		{"22P02", true},  // invalid_text_representation
	} {
		t.Run(tc.sqlstate, func(t *testing.T) {
			t.Parallel()
			b := newExpireBundle(t)
			ids := b.insertDue(t, 5)
			b.failUpdatesOf(t, ids[2], tc.sqlstate)

			res, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200, MaxBatchesPerCycle: 1}))

			poison := promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison`)
			if tc.rowFault {
				require.NoError(t, err)
				require.Equal(t, 4, res.Expired)
				require.Equal(t, 1, res.Failed)
				require.Equal(t, "Active", b.row(t, ids[2]).Status)
				require.Equal(t, 1, poison, "the refused row is remembered as poison")
				require.Len(t, b.logs.Records(t, "item failed"), 1)
				require.Empty(t, b.logs.Records(t, "cycle failed"))
				require.NotZero(t, b.metric(t, "promotion_expire_last_completed_timestamp_seconds"), "the cycle completed")
				return
			}
			require.Error(t, err, "a %s is an infrastructure error", tc.sqlstate)
			require.ErrorContains(t, err, tc.sqlstate)
			require.Zero(t, res.Expired)
			require.Zero(t, res.Failed)
			require.Equal(t, map[string]int{"Active": 5}, b.statusCounts(t), "the whole batch rolled back")
			require.Empty(t, b.events(t))
			require.Zero(t, poison, "nothing is remembered as poison for a fault of the database")
			require.Empty(t, b.logs.Records(t, "item failed"))
			require.Len(t, b.logs.Records(t, "cycle failed"), 1, "logged once")
			errorLines := 0
			for _, r := range b.logs.All(t) {
				if r["level"] == "ERROR" {
					errorLines++
				}
			}
			require.Equal(t, 1, errorLines, "one ERROR line for the fault: %s", b.logs.String())
			require.EqualValues(t, 1, b.metric(t, "promotion_expire_errors_total"), "counted once")
			require.EqualValues(t, 0, b.metric(t, "promotion_expire_items_total", "outcome", "failed"))
			require.Zero(t, b.metric(t, "promotion_expire_last_completed_timestamp_seconds"),
				"a failed cycle does not complete: PromotionExpireJobNotRunning sees a persistent fault")
			b.requireUnlocked(t, ids...)

			b.exec(t, `DROP TRIGGER expire_test_fail ON promotion.promotion_purchases`)
			require.Equal(t, 5, b.run(t, 200, 1).Expired, "the next cycle does the whole batch")
		})
	}
}

// A lost version race is not poison: the expiry whose version
// guard finds the row moved on re-reads it and drops it quietly (a debug
// line, counted with the skipped ones), and the next cycle takes it at its
// new version. Here a trigger moves purchase y's version on from inside the
// batch: purchase p refuses the set-based write (23514), so the batch is
// redone row by row, and x's statement bumps y before y's own runs.
func TestExpireLostVersionRaceIsNotPoison(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertDue(t, 5)
	var order []string
	rows, err := b.db.SQL.QueryContext(b.ctx, `SELECT id FROM promotion.promotion_purchases ORDER BY ends_at, id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		order = append(order, id)
	}
	require.NoError(t, rows.Err())
	x, p, y := order[0], order[2], order[4]
	b.failUpdatesOf(t, uuid.MustParse(p), "23514")
	b.exec(t, fmt.Sprintf(`CREATE FUNCTION promotion.expire_test_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE promotion.promotion_purchases SET version = version + 1 WHERE id = '%s';
	RETURN NULL;
END $$`, y), fmt.Sprintf(`CREATE TRIGGER expire_test_bump AFTER UPDATE ON promotion.promotion_purchases
	FOR EACH ROW WHEN (NEW.id = '%s') EXECUTE FUNCTION promotion.expire_test_bump()`, x))

	res := b.run(t, 200, 1)

	require.Equal(t, 3, res.Expired)
	require.Equal(t, 1, res.Failed, "only p, refused by its own statement, is poison")
	require.Equal(t, 1, res.SkippedLocked, "y is counted with the skipped ones")
	require.Equal(t, purchaseRow{Status: "Active", Version: 2, UpdatedAt: b.row(t, uuid.MustParse(y)).UpdatedAt}, b.row(t, uuid.MustParse(y)))
	require.Equal(t, 1, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison`))
	require.Equal(t, 0, promotiontest.Count(t, b.db, fmt.Sprintf(`SELECT count(*) FROM promotion.expire_poison WHERE purchase_id = '%s'`, y)))
	failed := b.logs.Records(t, "item failed")
	require.Len(t, failed, 1)
	require.Equal(t, p, failed[0]["purchase_id"])
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_errors_total"), "p only")
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_skip_locked_total"))
	dropped := b.logs.Records(t, "item dropped: changed by another writer")
	require.Len(t, dropped, 1)
	require.Equal(t, "DEBUG", dropped[0]["level"])
	require.Equal(t, y, dropped[0]["purchase_id"])

	b.exec(t, `DROP TRIGGER expire_test_bump ON promotion.promotion_purchases`,
		`DROP TRIGGER expire_test_fail ON promotion.promotion_purchases`)
	again := b.run(t, 200, 1)
	require.Equal(t, 2, again.Expired, "y at its new version, and p")
	require.EqualValues(t, 3, b.row(t, uuid.MustParse(y)).Version)
	require.Len(t, b.expiredEvents(t)[uuid.MustParse(y)], 1)
}

// A row the version guard filtered out although its version had not moved
// (a trigger returned NULL for it: the write was skipped, not raced) is the
// row's own refusal: poison, not a lost race.
func TestExpireRowSkippedByATriggerIsPoison(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 5)
	b.exec(t, fmt.Sprintf(`CREATE FUNCTION promotion.expire_test_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id = '%s' THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END $$`, ids[2]), `CREATE TRIGGER expire_test_skip BEFORE UPDATE ON promotion.promotion_purchases
	FOR EACH ROW EXECUTE FUNCTION promotion.expire_test_skip()`)

	res := b.run(t, 200, 1)

	require.Equal(t, 4, res.Expired)
	require.Equal(t, 1, res.Failed)
	require.Zero(t, res.SkippedLocked)
	require.Equal(t, purchaseRow{Status: "Active", Version: 1, UpdatedAt: b.row(t, ids[2]).UpdatedAt}, b.row(t, ids[2]))
	failed := b.logs.Records(t, "item failed")
	require.Len(t, failed, 1)
	require.Equal(t, ids[2].String(), failed[0]["purchase_id"])
	require.Contains(t, failed[0]["error"], "skipped its row")
	require.NotContains(t, b.expiredEvents(t), ids[2])
	require.Equal(t, 1, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison`))
}

// A poison item whose error echoes bytes a text column cannot hold (NUL,
// invalid UTF-8) is still remembered: storing its last error must not
// become a fault of the whole batch (22021), cycle after cycle.
func TestExpirePoisonWithUnstorableErrorTextIsRemembered(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 2)
	asOf := time.Now().UTC().Truncate(time.Microsecond)

	res, err := b.batches.ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, Expire: func(p *domain.Purchase) error {
		if p.ID() == ids[0] {
			return errors.New("refused: \x00 and \xff")
		}
		return p.Expire(asOf)
	}})

	require.NoError(t, err)
	require.Len(t, res.Expired, 1)
	require.Len(t, res.Failed, 1)
	var lastError string
	require.NoError(t, b.db.SQL.QueryRowContext(b.ctx, `SELECT last_error FROM promotion.expire_poison WHERE purchase_id = $1`, ids[0]).Scan(&lastError))
	require.Equal(t, "expire: refused:  and \uFFFD", lastError)
}

// The batch's one statement stores an event only with the row its partition
// key names, so a publication keyed otherwise would lose its events
// silently: its purchases fail as poison instead, and nothing is written.
func TestExpireRefusesAnEventNotKeyedByItsPurchase(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 1)
	store := b.publishingAs(t, func(p *domain.Purchase, msg *message.Message) {
		msg.Metadata.Set(kafka.MetaPartitionKey, "tenant-"+p.TenantID().String())
	})
	asOf := time.Now().UTC()

	res, err := promotiontest.ExpireBatches(t, store).ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})

	require.NoError(t, err)
	require.Empty(t, res.Expired)
	require.Len(t, res.Failed, 1)
	require.ErrorContains(t, res.Failed[0].Err, "is not the purchase id")
	require.Equal(t, "Active", b.row(t, ids[0]).Status)
	require.Empty(t, b.events(t))
}

// An expiry whose event no broker would take (outbox.ErrMessageTooLarge)
// is that purchase's poison, kept for a retry; the rest of the batch
// commits, and the next cycle does not fail on it again.
func TestExpireKeepsAnEventTooLargeAsPoison(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 3)
	store := b.publishingAs(t, func(p *domain.Purchase, msg *message.Message) {
		if p.ID() == ids[1] {
			msg.Payload = []byte(`"` + strings.Repeat("a", kafka.MaxRecordBytes) + `"`) // JSON, too large
		}
	})
	batches := promotiontest.ExpireBatches(t, store)
	asOf := time.Now().UTC()

	for i := range 2 {
		res, err := batches.ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, RetryPoison: 1,
			Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})
		require.NoError(t, err)
		require.Len(t, res.Failed, 1, "batch %d: %+v", i, res)
		require.Equal(t, ids[1], res.Failed[0].PurchaseID)
		require.ErrorIs(t, res.Failed[0].Err, outbox.ErrMessageTooLarge)
	}
	require.Equal(t, "Active", b.row(t, ids[1]).Status)
	require.Equal(t, "Expired", b.row(t, ids[0]).Status)
	require.Equal(t, "Expired", b.row(t, ids[2]).Status)
	require.Len(t, b.events(t), 2)
	var failures int
	require.NoError(t, b.db.SQL.QueryRowContext(b.ctx, `SELECT failures FROM promotion.expire_poison WHERE purchase_id = $1`, ids[1]).Scan(&failures))
	require.Equal(t, 2, failures)
}

// publishingAs is a repository on the bundle's database whose events are
// PurchaseChangedV1's, then changed by edit.
func (b *expireBundle) publishingAs(tb testing.TB, edit func(*domain.Purchase, *message.Message)) *ExpireRepository {
	tb.Helper()
	v1 := PurchaseChangedV1()
	store, err := NewExpireRepository(b.db.Gorm, b.publisher, Publication{Topic: v1.Topic,
		Message: func(ctx context.Context, p *domain.Purchase, at time.Time, id uuid.UUID) (*message.Message, error) {
			msg, err := v1.Message(ctx, p, at, id)
			if err == nil {
				edit(p, msg)
			}
			return msg, err
		}})
	require.NoError(tb, err)
	return store
}

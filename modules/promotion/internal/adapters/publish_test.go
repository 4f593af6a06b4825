package adapters

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
)

// The rule that every statement handing the outbox its events calls
// outbox.publish in a CTE its final SELECT reads runs over every publishing
// module in platform/outbox/outboxrules (TestEveryPublishingModuleKeepsTheOutboxRules),
// with the layout guard; this file shows in PostgreSQL what it prevents.

// What the check guards against, in PostgreSQL: the same statement stores
// its events only when its final SELECT reads the publication's CTE.
func TestAnUnreadPublicationStoresNothing(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	const read = `WITH written AS (SELECT unnest(@ids::uuid[]) AS id),
published AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM written)))
SELECT id FROM written, published`
	unread := strings.Replace(read, "FROM written, published", "FROM written", 1)

	ids := b.insertDue(t, 2)
	for i, q := range []string{unread, read} {
		p, err := purchases.Get(b.ctx, ids[i])
		require.NoError(t, err)
		msgs, _, err := purchases.events.messages(b.ctx, p, p.UpdatedAt())
		require.NoError(t, err)
		require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			ids, err := purchases.events.writeWith(b.ctx, tx, b.publisher, q, pgx.NamedArgs{"ids": []string{p.ID().String()}},
				[]string{p.ID().String()}, msgs)
			require.Equal(t, []string{p.ID().String()}, ids)
			return err
		}))
	}
	stored := b.events(t)
	require.Len(t, stored, 1, "only the statement that reads published stored its event")
	require.Equal(t, ids[1].String(), stored[0].Metadata["partition_key"])
}

// One transition statement stores an event with each row it wrote and none
// for a row its version guard left unwritten, in the same statement.
func TestTransitionStatementStoresEventsOnlyWithWrittenRows(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	ids := b.insertDue(t, 3)
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	var ts []transition
	var events [][]*message.Message
	for _, id := range ids {
		p, err := purchases.Get(b.ctx, id)
		require.NoError(t, err)
		previous := p.Version()
		require.NoError(t, p.Expire(asOf))
		msgs, ev, err := purchases.events.messages(b.ctx, p, p.UpdatedAt())
		require.NoError(t, err)
		ts, events = append(ts, transition{purchase: p, previousVersion: previous, event: ev}), append(events, msgs)
	}
	b.exec(t, `UPDATE promotion.promotion_purchases SET version = version + 1 WHERE id = '`+ids[1].String()+`'`)

	var written []string
	require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		written, err = purchases.events.writeTransitions(context.Background(), tx, b.publisher, ts, events, false)
		return err
	}))
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, written)
	stored := b.expiredEvents(t)
	require.Len(t, stored, 2)
	require.Len(t, stored[ids[0]], 1)
	require.Len(t, stored[ids[2]], 1)
	require.Empty(t, stored[ids[1]], "the guarded row got no event")
	require.Equal(t, map[string]int{"Active": 1, "Expired": 2}, b.statusCounts(t))
}

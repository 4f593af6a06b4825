package expirebench

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/kafka"
)

// TestBoundWritesWhatTheModuleWrites keeps the bound honest: on the same
// purchases, BoundSQL must leave the same rows behind as the module's batch
// — purchases Expired at version 2, and per purchase one outbox row with
// the same row layout, the same record metadata keys
// and an event that the contract decodes and validates and that equals the
// module's but for its messageId.
func TestBoundWritesWhatTheModuleWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 40, 12)
	inst := newInstance(t, f.db.URL)
	ctx := context.Background()
	asOf := time.Now().UTC().Truncate(time.Microsecond)

	res, err := inst.batches.ExpireBatch(ctx, expiry.ExpireBatch{
		AsOf: asOf, Limit: 10,
		Expire: func(p *domain.Purchase) error { return p.Expire(asOf) },
	})
	require.NoError(t, err)
	require.Len(t, res.Expired, 10)
	module := readOutbox(t, f.db)
	require.Len(t, module, 10)
	f.restore(t)

	out, err := f.db.SQL.ExecContext(ctx, BoundSQL, asOf, 10, uuid.NewString(), benchTraceparent)
	require.NoError(t, err)
	n, err := out.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 10, n)
	bound := readOutbox(t, f.db)

	require.Len(t, bound, 10)
	require.Equal(t, 2, f.countDue(t), "both took the 10 oldest of the 12 due")
	for id, m := range module {
		bd, ok := bound[id]
		require.True(t, ok, "the bound expired purchase %s too", id)
		require.Equal(t, bd.UUID, bd.Event.MessageID.String(), "row uuid = messageId")
		require.Equal(t, m.UUID, m.Event.MessageID.String(), "row uuid = messageId")
		require.ElementsMatch(t, keys(m.Metadata), keys(bd.Metadata))
		require.Equal(t, id, bd.Metadata[kafka.MetaPartitionKey])
		m.Event.MessageID, bd.Event.MessageID = uuid.Nil, uuid.Nil
		require.Equal(t, m.Event, bd.Event)
		require.Equal(t, contract.StatusExpired, bd.Event.Payload.Status)
		require.EqualValues(t, 2, bd.Event.Payload.Version)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

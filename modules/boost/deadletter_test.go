package boost_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestRecordsPostgreSQLCannotStoreAsTextAreDeadLetteredOnEveryPartition:
// a header with a NUL byte (refused in jsonb) and an amount of invalid UTF-8
// (echoed in the error, refused in text) on every partition neither stop the
// consumer nor lose a byte: both are dead letters as they came, and a
// purchase made afterwards is applied.
func TestRecordsPostgreSQLCannotStoreAsTextAreDeadLetteredOnEveryPartition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nul := &kgo.Record{Key: []byte(uuid.NewString()), Value: []byte("not JSON"), Headers: []kgo.RecordHeader{
		{Key: contract.HeaderMessageID, Value: []byte(uuid.NewString())},
		{Key: "note", Value: []byte("a\x00b")},
	}}
	invalid := record(t, newPurchase(4, project(uuid.New())).envelope(contract.StatusActive, 1))
	amount := []byte(`"amount":1500.00`)
	require.Equal(t, 1, bytes.Count(invalid.Value, amount))
	invalid.Value = bytes.Replace(invalid.Value, amount, []byte("\"amount\":\"\xff\xfe\xc3(\""), 1)
	poison := b.produceOnEveryPartition(t, nul, invalid)

	target := project(uuid.New())
	b.produce(t, record(t, newPurchase(9, target).envelope(contract.StatusActive, 1)))
	b.requireBoost(t, target, 9, 1)
	// The purchase shows that its own partition moved on; the others are
	// read on their own and may still be at their poison.
	testbed.Eventually(t, func() error {
		var n int
		if err := b.db.SQL.QueryRow(`SELECT count(*) FROM consumer.dead_letters WHERE consumer = 'boost'`).Scan(&n); err != nil {
			return err
		}
		if n != len(poison) {
			return fmt.Errorf("%d dead letters, want %d", n, len(poison))
		}
		return nil
	})

	type header struct{ Key, Value []byte }
	type deadLetter struct {
		Key, Value []byte
		Headers    []header
	}
	stored := map[string]*deadLetter{}
	rows, err := b.db.SQL.Query(`
		SELECT d.kafka_partition, d.kafka_offset, d.record_key, d.value, h.key, h.value
		FROM consumer.dead_letters d
		LEFT JOIN LATERAL unnest(d.header_keys, d.header_values) WITH ORDINALITY AS h(key, value, n) ON true
		WHERE d.consumer = 'boost' ORDER BY d.id, h.n`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var partition int32
		var offset int64
		var key, value, hKey, hValue []byte
		require.NoError(t, rows.Scan(&partition, &offset, &key, &value, &hKey, &hValue))
		at := fmt.Sprintf("%d@%d", partition, offset)
		if stored[at] == nil {
			stored[at] = &deadLetter{Key: key, Value: value}
		}
		stored[at].Headers = append(stored[at].Headers, header{hKey, hValue})
	}
	require.NoError(t, rows.Err())
	require.Len(t, stored, len(poison))
	for _, r := range poison {
		dl := stored[fmt.Sprintf("%d@%d", r.Partition, r.Offset)]
		require.NotNil(t, dl, "dead letter of %d@%d", r.Partition, r.Offset)
		require.Equal(t, r.Key, dl.Key)
		require.Equal(t, r.Value, dl.Value)
		want := make([]header, len(r.Headers))
		for i, h := range r.Headers {
			want[i] = header{[]byte(h.Key), h.Value}
		}
		require.Equal(t, want, dl.Headers)
	}
	var minimal int64
	require.NoError(t, b.db.Gorm.Raw(`SELECT count(*) FROM consumer.dead_letters WHERE refused_sqlstate IS NOT NULL`).Scan(&minimal).Error)
	require.Zero(t, minimal, "every dead letter is whole")
	var nulEscaped, amountQuoted int64
	require.NoError(t, b.db.SQL.QueryRow(`
		SELECT count(*) FILTER (WHERE headers->>'note' = 'a\x00b'),
		       count(*) FILTER (WHERE position('amount: want a JSON number, got "\"\xff\xfe' IN error) > 0)
		FROM consumer.dead_letters`).Scan(&nulEscaped, &amountQuoted))
	require.Equal(t, [2]int64{testbed.KafkaPartitions, testbed.KafkaPartitions}, [2]int64{nulEscaped, amountQuoted},
		"the readable headers and error escape what text cannot hold")
	require.Equal(t, float64(len(poison)), b.counter(t, "pin_consumer_dead_letters_total"))
	require.Zero(t, testbed.Metric(t, b.reg, "pin_consumer_skipped_total").GetCounter().GetValue())
}

// TestUnknownEventTypeIsDeadLetteredNotApplied: an event of another type on
// the topic is never applied; it is dead-lettered naming the type (ADR 0016),
// and the partition goes on.
func TestUnknownEventTypeIsDeadLetteredNotApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	madeUp, target := project(uuid.New()), project(uuid.New())
	e := newPurchase(10, madeUp).envelope(contract.StatusActive, 1)
	e.EventType = "pin.promotion.something-else"

	b.produce(t, record(t, e), record(t, newPurchase(3, target).envelope(contract.StatusActive, 1)))
	b.waitConsumed(t, 2)
	b.requireBoost(t, target, 3, 1)
	weight, active := b.boostOf(t, madeUp)
	require.Equal(t, [2]int{0, 0}, [2]int{weight, active}, "the made-up target's boost")
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_dead_letters_total"))
	require.Zero(t, b.counter(t, "pin_consumer_skipped_total"))
	require.Equal(t, []string{`contract.Decode: contract: unknown event type "pin.promotion.something-else"`},
		deadLetterErrors(t, b, e.MessageID))
}

// deadLetterErrors are the errors of the boost consumer's dead letters of
// the message.
func deadLetterErrors(tb testing.TB, b *bundle, messageID uuid.UUID) []string {
	tb.Helper()
	var errs []string
	require.NoError(tb, b.db.Gorm.Raw(`SELECT error FROM consumer.dead_letters WHERE consumer = 'boost' AND headers->>'message_id' = ?::text`,
		messageID.String()).Scan(&errs).Error)
	return errs
}

// TestRecordOutsideTheBoundsIsDeadLetteredWithTheRule: 5,000 targets were
// applied, versions 0 and -3 counted as stale; each is now a dead letter
// naming the rule it broke, and boosts nothing.
func TestRecordOutsideTheBoundsIsDeadLetteredWithTheRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	many := make([]contract.Target, 5000)
	many[0] = target
	for i := 1; i < len(many); i++ {
		many[i] = project(uuid.New())
	}
	cases := map[string]contract.Envelope{
		"payload.targets: must have 1 to 10 items, has 5000": newPurchase(10, many...).envelope(contract.StatusActive, 1),
		"payload.version: must be at least 1":                newPurchase(10, target).envelope(contract.StatusActive, 0),
	}
	minus := newPurchase(10, target).envelope(contract.StatusActive, -3)
	for _, e := range cases {
		b.produce(t, record(t, e))
	}
	b.produce(t, record(t, minus))
	b.waitConsumed(t, 3)
	b.requireBoostNow(t, target, 0, 0)
	require.Equal(t, 3.0, b.counter(t, "pin_consumer_dead_letters_total"))
	require.Zero(t, b.counter(t, "pin_consumer_stale_total"))
	for rule, e := range cases {
		errs := deadLetterErrors(t, b, e.MessageID)
		require.Len(t, errs, 1)
		require.Contains(t, errs[0], rule)
	}
	require.Contains(t, deadLetterErrors(t, b, minus.MessageID)[0], "payload.version: must be at least 1")
}

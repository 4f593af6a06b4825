package deadletter_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	consumerdl "github.com/pinmarket/pin/platform/consumer/deadletters"
	"github.com/pinmarket/pin/platform/deadletter"
	outboxdl "github.com/pinmarket/pin/platform/outbox/deadletters"
)

// TestBothSidesPrintTheFieldsTheyAlwaysHad: the dead letters of both sides
// share Letter's fields, and `pin outbox dead-letters` and `pin consumer
// dead-letters` print the same JSON fields as before the shared shape (ADR
// 0029): operators' scripts and the runbooks read them.
func TestBothSidesPrintTheFieldsTheyAlwaysHad(t *testing.T) {
	t.Parallel()
	now, text := time.Now(), "x"
	letter := deadletter.Letter{Ref: deadletter.Ref{ID: 1, Topic: "t", MessageID: "m"}, Attempts: 1, Error: "e",
		DeadLetteredAt: now, DiscardedAt: &now, DiscardReason: "r"}
	outbox := outboxdl.DeadLetter{Letter: letter, OutboxOffset: 1, Payload: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Key: "k", WaitsBehind: 1, FirstWaiting: []outboxdl.OutboxRow{{}}}
	consumer := consumerdl.DeadLetter{Letter: letter, Group: "g",
		KeyValue: consumerdl.KeyValue{Key: &text, KeyBase64: "eA==", Value: &text, ValueBase64: "eA=="},
		Headers:  []consumerdl.KeyValue{}, RefusedSQLState: "22021", Replayable: true}

	ref := []string{"id", "messageId", "topic"}
	letterFields := append([]string{"attempts", "deadLetteredAt", "discardReason", "discardedAt", "error"}, ref...)
	for _, tt := range []struct {
		name        string
		v           any
		shared, own []string
	}{
		{"outbox dead letter", outbox, letterFields, []string{"firstWaiting", "key", "metadata", "outboxOffset", "payload",
			"waitingRecords", "waitsBehind"}},
		{"outbox replayed", outboxdl.Replayed{}, ref, []string{"newOutboxOffset"}},
		{"consumer dead letter", consumer, letterFields, []string{"group", "headers", "key", "keyBase64", "offset", "partition",
			"refusedSqlstate", "replayable", "value", "valueBase64"}},
		{"consumer replayed", consumerdl.Replayed{}, ref, []string{"group", "offset", "outcome", "partition"}},
	} {
		want := slices.Sorted(slices.Values(append(slices.Clone(tt.shared), tt.own...)))
		require.Equal(t, want, fields(t, tt.v), tt.name)
	}
}

// fields are the names of v's JSON object, sorted.
func fields(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	var names []string
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

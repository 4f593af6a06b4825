package consumer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/kafka"
)

// TestOriginOfReadsTheHeader: absent or "transition" is a transition,
// "snapshot" a snapshot, and any other value, even one differing only in
// case or empty, is an error rather than a guess.
func TestOriginOfReadsTheHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    consumer.Origin
		unknown bool
	}{
		{"no headers", nil, consumer.OriginTransition, false},
		{"no such header", map[string]string{"message_id": "x"}, consumer.OriginTransition, false},
		{"transition", map[string]string{kafka.HeaderEventOrigin: "transition"}, consumer.OriginTransition, false},
		{"snapshot", map[string]string{kafka.HeaderEventOrigin: "snapshot"}, consumer.OriginSnapshot, false},
		{"another value", map[string]string{kafka.HeaderEventOrigin: "backfill"}, 0, true},
		{"another case", map[string]string{kafka.HeaderEventOrigin: "Snapshot"}, 0, true},
		{"empty", map[string]string{kafka.HeaderEventOrigin: ""}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := consumer.OriginOf(consumer.Record{Headers: tc.headers})
			if tc.unknown {
				require.ErrorIs(t, err, consumer.ErrUnknownOrigin)
				require.ErrorContains(t, err, kafka.HeaderEventOrigin)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if v, ok := tc.headers[kafka.HeaderEventOrigin]; ok {
				require.Equal(t, v, got.String(), "String gives the header value back")
			}
		})
	}
}

package contract_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// goldenRecord is the Active golden event as the outbox relay puts it on the
// topic: key = purchase id, message_id header = messageId.
func goldenRecord(tb testing.TB) contract.Record {
	tb.Helper()
	value, err := os.ReadFile("testdata/purchase-changed.v1.active.golden.json")
	require.NoError(tb, err)
	return contract.Record{
		Key: []byte("8c2d5e7a-1f3b-4a6c-9e8d-0b1a2c3d4e5f"),
		Headers: map[string]string{
			contract.HeaderMessageID:       "5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11",
			contract.HeaderEventType:       contract.EventType,
			contract.HeaderContractVersion: "1",
		},
		Value: value,
	}
}

func TestDecodeRecordAcceptsAConsistentRecord(t *testing.T) {
	t.Parallel()
	e, err := contract.DecodeRecord(goldenRecord(t), nil)
	require.NoError(t, err)
	require.Equal(t, "5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11", e.MessageID.String())
	require.Equal(t, e.AggregateID, e.Payload.PurchaseID)
	require.Equal(t, int64(1), e.Payload.Version)
}

// TestDecodeRecordRefusesDisagreement: every way a record can contradict
// itself is an ErrRecordMismatch, never a guess.
func TestDecodeRecordRefusesDisagreement(t *testing.T) {
	t.Parallel()
	const otherID = "00000000-0000-4000-8000-000000000001"
	for name, spoil := range map[string]func(r *contract.Record){
		"no key":                  func(r *contract.Record) { r.Key = nil },
		"key not a UUID":          func(r *contract.Record) { r.Key = []byte("purchase-1") },
		"key is another purchase": func(r *contract.Record) { r.Key = []byte(otherID) },
		"no message_id header":    func(r *contract.Record) { delete(r.Headers, contract.HeaderMessageID) },
		"message_id of another":   func(r *contract.Record) { r.Headers[contract.HeaderMessageID] = otherID },
		"message_id not a UUID":   func(r *contract.Record) { r.Headers[contract.HeaderMessageID] = "x" },
		"aggregateId ≠ purchaseId": func(r *contract.Record) {
			r.Value = []byte(strings.Replace(string(r.Value), `"purchaseId": "8c2d5e7a`, `"purchaseId": "9c2d5e7a`, 1))
		},
		"aggregateId ≠ key": func(r *contract.Record) {
			r.Value = []byte(strings.Replace(string(r.Value), `"aggregateId": "8c2d5e7a`, `"aggregateId": "9c2d5e7a`, 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := goldenRecord(t)
			spoil(&r)
			_, err := contract.DecodeRecord(r, nil)
			require.ErrorIs(t, err, contract.ErrRecordMismatch)
		})
	}
}

func TestDecodeRecordReportsAnUndecodableValue(t *testing.T) {
	t.Parallel()
	r := goldenRecord(t)
	r.Value = []byte("not json")
	_, err := contract.DecodeRecord(r, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, contract.ErrRecordMismatch)
}

// TestDecodeRecordRefusesAnotherEventTypeHeader: the event_type header names
// another type, whatever the value holds: ErrUnknownEventType, a dead letter.
func TestDecodeRecordRefusesAnotherEventTypeHeader(t *testing.T) {
	t.Parallel()
	r := goldenRecord(t)
	r.Headers[contract.HeaderEventType] = "pin.promotion.something-else"
	_, err := contract.DecodeRecord(r, nil)
	require.ErrorIs(t, err, contract.ErrUnknownEventType)

	r.Value = []byte("not the envelope of this contract")
	_, err = contract.DecodeRecord(r, nil)
	require.ErrorIs(t, err, contract.ErrUnknownEventType)
}

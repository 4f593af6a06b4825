package contract_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// newLogCapture is a logger whose records a test can read back. The
// contract is a Go module of its own and imports nothing of the service
// (platform/testbed's LogBuffer included), so this small sink is its own.
func newLogCapture(tb testing.TB) (*slog.Logger, *logCapture) {
	tb.Helper()
	c := &logCapture{}
	return slog.New(slog.NewJSONHandler(&c.buf, nil)), c
}

// logCapture holds JSON log lines of one goroutine.
type logCapture struct{ buf bytes.Buffer }

// All returns every record written so far, in order.
func (c *logCapture) All(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for line := range strings.Lines(c.buf.String()) {
		var rec map[string]any
		require.NoError(tb, json.Unmarshal([]byte(line), &rec), line)
		out = append(out, rec)
	}
	return out
}

// requireEnvelopesEqual compares envelopes, amounts by value.
func requireEnvelopesEqual(tb testing.TB, want, got contract.Envelope) {
	tb.Helper()
	require.True(tb, want.Payload.Price.Amount.Equal(got.Payload.Price.Amount.Decimal),
		"amount: want %s, got %s", want.Payload.Price.Amount, got.Payload.Price.Amount)
	want.Payload.Price.Amount, got.Payload.Price.Amount = contract.Amount{}, contract.Amount{}
	require.Equal(tb, want, got)
}

// TestDecodeRoundTrip decodes every golden file back into the envelope it
// was made from, times and amounts exactly, without a warning.
func TestDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger, logs := newLogCapture(t)
			data, err := os.ReadFile(goldenPath(tc.name))
			require.NoError(t, err)
			got, err := contract.Decode(data, logger)
			require.NoError(t, err)
			requireEnvelopesEqual(t, tc.envelope, got)
			require.True(t, got.OccurredAt.Equal(tc.envelope.OccurredAt))
			require.Empty(t, logs.All(t))
			require.NoError(t, got.Validate())
		})
	}
}

// TestAmountIsExact round-trips amounts that binary floating point cannot
// all hold, through Marshal and Decode, comparing the exact text.
func TestAmountIsExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, wire string }{
		{"0.10", "0.10"},
		{"0.1", "0.10"},
		{"0", "0.00"},
		{"0.01", "0.01"},
		{"1500", "1500.00"},
		{"1500.00", "1500.00"},
		{"123456789012.34", "123456789012.34"},
		{"999999999999.99", "999999999999.99"},
		{"9007199254740.99", ""}, // beyond decimal(14,2): refused, not rounded
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			e := validEnvelope(t)
			e.Payload.Price.Amount = mustAmount(t, tc.in)
			wire, err := contract.Marshal(e)
			if tc.wire == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Contains(t, string(wire), `"amount":`+tc.wire+`,`)

			got, err := contract.Decode(wire, nil)
			require.NoError(t, err)
			require.Equal(t, tc.wire, got.Payload.Price.Amount.StringFixed(2))
			require.True(t, got.Payload.Price.Amount.Equal(e.Payload.Price.Amount.Decimal))
			again, err := contract.Marshal(got)
			require.NoError(t, err)
			require.Equal(t, string(wire), string(again))
		})
	}
}

// TestAmountJSON covers the Amount codec on its own.
func TestAmountJSON(t *testing.T) {
	t.Parallel()
	var a contract.Amount
	require.NoError(t, json.Unmarshal([]byte(`1.5e3`), &a), "any JSON number form")
	require.Equal(t, "1500.00", a.StringFixed(2))
	require.Error(t, json.Unmarshal([]byte(`"1500.00"`), &a), "a string is not the contract's amount")
	require.Error(t, json.Unmarshal([]byte(`true`), &a))

	b, err := json.Marshal(mustAmount(t, "0.005"))
	require.NoError(t, err)
	require.Equal(t, "0.005", string(b), "more than two decimals is written in full, never rounded")
	b, err = json.Marshal(contract.Amount{})
	require.NoError(t, err)
	require.Equal(t, "0.00", string(b))
	_, err = contract.ParseAmount("12,50")
	require.Error(t, err)

	// What an error echoes is quoted: a consumer stores the error as text.
	for _, data := range []string{"\"\xff\xfe\x00\"", "1\xff\x00"} {
		err := a.UnmarshalJSON([]byte(data))
		require.Error(t, err)
		require.True(t, utf8.ValidString(err.Error()) && !strings.ContainsRune(err.Error(), 0), "%q", err.Error())
		require.Contains(t, err.Error(), `\xff`)
	}
	_, err = contract.ParseAmount("\xff\x00")
	require.True(t, utf8.ValidString(err.Error()) && !strings.ContainsRune(err.Error(), 0), "%q", err.Error())
}

// TestTimesAreUTCMicroseconds checks that any input time comes out as RFC
// 3339 UTC with six digits and decodes to the same instant.
func TestTimesAreUTCMicroseconds(t *testing.T) {
	t.Parallel()
	moscow := time.FixedZone("MSK", 3*60*60)
	occurred := time.Date(2026, 11, 30, 13, 0, 0, 123456789, moscow)
	e := validEnvelope(t)
	e = contract.NewEnvelope(e.Payload, e.MessageID, occurred)
	wire, err := contract.Marshal(e)
	require.NoError(t, err)
	require.Contains(t, string(wire), `"occurredAt":"2026-11-30T10:00:00.123456Z"`)

	got, err := contract.Decode(wire, nil)
	require.NoError(t, err)
	require.Equal(t, e.OccurredAt, got.OccurredAt, "NewEnvelope already truncated, so decoding gives the same value")
	require.Equal(t, time.UTC, got.OccurredAt.Location())

	// Decode is lenient about the producer's exact format.
	lenient := bytes.Replace(wire, []byte(`"2026-11-30T10:00:00.123456Z"`), []byte(`"2026-11-30T13:00:00.1234+03:00"`), 1)
	got, err = contract.Decode(lenient, nil)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 30, 10, 0, 0, 123400000, time.UTC), got.OccurredAt)
}

// TestNewEnvelopeDoesNotAliasTargets keeps the caller's slice its own.
func TestNewEnvelopeDoesNotAliasTargets(t *testing.T) {
	t.Parallel()
	p := validEnvelope(t).Payload
	e := contract.NewEnvelope(p, uuid.New(), time.Now())
	p.Targets[0].TargetID = uuid.Nil
	require.NotEqual(t, uuid.Nil, e.Payload.Targets[0].TargetID)
	require.Equal(t, p.PurchaseID, e.AggregateID)
	require.Equal(t, contract.EventType, e.EventType)
	require.Equal(t, contract.ContractVersion, e.ContractVersion)
	require.Equal(t, contract.AggregateType, e.AggregateType)
}

// replaceOnce swaps the first occurrence of old in the golden "active" wire
// form, so a test can feed Decode what a future producer might send.
func replaceOnce(t *testing.T, old, new string) []byte {
	t.Helper()
	wire, err := contract.Marshal(validEnvelope(t))
	require.NoError(t, err)
	require.Contains(t, string(wire), old)
	return []byte(strings.Replace(string(wire), old, new, 1))
}

// TestDecodeKeepsUnknownEnumValues follows the fallback rule: keep the string,
// warn, do not fail.
func TestDecodeKeepsUnknownEnumValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, old, new, field string
		check                 func(t *testing.T, e contract.Envelope)
	}{
		{"status", `"status":"Active"`, `"status":"` + unknownStatus + `"`, "payload.status", func(t *testing.T, e contract.Envelope) {
			require.Equal(t, contract.Status(unknownStatus), e.Payload.Status)
			require.False(t, e.Payload.Status.Known())
		}},
		{"paymentStatus", `"paymentStatus":"NotRequired"`, `"paymentStatus":"` + unknownPaymentStatus + `"`, "payload.paymentStatus", func(t *testing.T, e contract.Envelope) {
			require.Equal(t, contract.PaymentStatus(unknownPaymentStatus), e.Payload.PaymentStatus)
			require.False(t, e.Payload.PaymentStatus.Known())
		}},
		{"packageKind", `"packageKind":"ProjectBoost"`, `"packageKind":"` + unknownPackageKind + `"`, "payload.packageKind", func(t *testing.T, e contract.Envelope) {
			require.Equal(t, contract.PackageKind(unknownPackageKind), e.Payload.PackageKind)
			require.False(t, e.Payload.PackageKind.Known())
		}},
		{"targetKind", `"targetKind":"Project"`, `"targetKind":"` + unknownTargetKind + `"`, "payload.targets[0].targetKind", func(t *testing.T, e contract.Envelope) {
			require.Equal(t, contract.TargetKind(unknownTargetKind), e.Payload.Targets[0].TargetKind)
			require.False(t, e.Payload.Targets[0].TargetKind.Known())
			require.True(t, e.Payload.Targets[1].TargetKind.Known(), "the other target is untouched")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger, logs := newLogCapture(t)
			got, err := contract.Decode(replaceOnce(t, tc.old, tc.new), logger)
			require.NoError(t, err)
			tc.check(t, got)
			recs := logs.All(t)
			require.Len(t, recs, 1)
			require.Equal(t, "WARN", recs[0]["level"])
			require.Equal(t, tc.field, recs[0]["field"])
			require.Equal(t, strings.Trim(strings.SplitN(tc.new, ":", 2)[1], `"`), recs[0]["value"])
			require.Equal(t, "5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11", recs[0]["message_id"])
		})
	}
}

// TestDecodeOtherContractVersion warns and carries on.
func TestDecodeOtherContractVersion(t *testing.T) {
	t.Parallel()
	logger, logs := newLogCapture(t)
	got, err := contract.Decode(replaceOnce(t, `"contractVersion":1`, `"contractVersion":2`), logger)
	require.NoError(t, err)
	require.Equal(t, 2, got.ContractVersion)
	require.Equal(t, contract.StatusActive, got.Payload.Status, "the rest is decoded as version 1")
	recs := logs.All(t)
	require.Len(t, recs, 1)
	require.Equal(t, "WARN", recs[0]["level"])
	require.Equal(t, "contractVersion", recs[0]["field"])
	require.Equal(t, "2", recs[0]["value"])
}

// TestDecodeRefusesAnotherEventType: an event of another type is
// ErrUnknownEventType, also when the rest of it is not this contract's
// envelope at all, so a consumer skips it instead of applying it as a
// purchase change or dead-lettering it.
func TestDecodeRefusesAnotherEventType(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"an envelope of another type": replaceOnce(t, `"eventType":"pin.promotion.purchase-changed"`, `"eventType":"pin.promotion.something-else"`),
		"another shape altogether":    []byte(`{"eventType":"pin.promotion.something-else","payload":{"note":1}}`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := contract.Decode(data, nil)
			require.ErrorIs(t, err, contract.ErrUnknownEventType)
			require.Contains(t, err.Error(), `"pin.promotion.something-else"`)
		})
	}
	for name, data := range map[string][]byte{
		"no eventType": []byte(`{"payload":{}}`),
		"not JSON":     []byte(`{"eventType":`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := contract.Decode(data, nil)
			require.Error(t, err)
			require.NotErrorIs(t, err, contract.ErrUnknownEventType)
		})
	}
}

// TestDecodeIgnoresUnknownFields accepts what an additive revision may add,
// silently.
func TestDecodeIgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	logger, logs := newLogCapture(t)
	// Added to the decoded tree, not spliced into the text: the test holds
	// whatever field the payload ends with.
	data := mutateJSON(t, func(doc map[string]any) {
		doc["partitionHint"] = 7
		p := doc["payload"].(map[string]any)
		p["renewalOf"] = "x"
		p["extra"] = map[string]any{"a": []any{1, 2}}
		p["targets"].([]any)[0].(map[string]any)["note"] = "n"
		p["price"].(map[string]any)["tax"] = map[string]any{"rate": 0}
	})
	got, err := contract.Decode(data, logger)
	require.NoError(t, err)
	requireEnvelopesEqual(t, validEnvelope(t), got)
	require.Empty(t, logs.All(t))
}

// TestDecodeRejects covers what the compatibility rules never allow: a
// missing or null required field, or a wrong JSON type.
func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	wire, err := contract.Marshal(validEnvelope(t))
	require.NoError(t, err)
	without := func(path ...string) []byte {
		var doc map[string]any
		d := json.NewDecoder(bytes.NewReader(wire))
		d.UseNumber()
		require.NoError(t, d.Decode(&doc))
		m := doc
		for _, k := range path[:len(path)-1] {
			switch v := m[k].(type) {
			case map[string]any:
				m = v
			case []any:
				m = v[0].(map[string]any)
			}
		}
		delete(m, path[len(path)-1])
		out, err := json.Marshal(doc)
		require.NoError(t, err)
		return out
	}
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"missing messageId", "messageId", without("messageId")},
		{"missing occurredAt", "occurredAt", without("occurredAt")},
		{"missing payload", "payload", without("payload")},
		{"missing purchaseId", "payload.purchaseId", without("payload", "purchaseId")},
		{"missing targets", "payload.targets", without("payload", "targets")},
		{"missing targetId", "payload.targets[0].targetId", without("payload", "targets", "targetId")},
		{"missing status", "payload.status", without("payload", "status")},
		{"missing endsAt", "payload.endsAt", without("payload", "endsAt")},
		{"missing amount", "payload.price.amount", without("payload", "price", "amount")},
		{"missing currency", "payload.price.currency", without("payload", "price", "currency")},
		{"missing currency sign", "payload.price.currency.sign", without("payload", "price", "currency", "sign")},
		{"missing version", "payload.version", without("payload", "version")},
		{"null status", "payload.status", replaceOnce(t, `"status":"Active"`, `"status":null`)},
		{"amount as string", "amount", replaceOnce(t, `"amount":1500.00`, `"amount":"1500.00"`)},
		{"boostWeight as string", "boostWeight", replaceOnce(t, `"boostWeight":10`, `"boostWeight":"10"`)},
		{"bad uuid", "tenantId", replaceOnce(t, `"tenantId":"3f1d1c8e`, `"tenantId":"zz1d1c8e`)},
		{"bad time", "payload.startsAt", replaceOnce(t, `"startsAt":"2026-11-23T10:00:00.123456Z"`, `"startsAt":"23.11.2026"`)},
		{"not an object", "", []byte(`[1,2]`)},
		{"null", "messageId", []byte(`null`)},
		{"not JSON", "", []byte(`{"messageId":`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := contract.Decode(tc.data, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), "contract.Decode")
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

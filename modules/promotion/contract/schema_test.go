package contract_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// TestEmbeddedSchemaMatchesDocs keeps contract.JSONSchema byte-identical to
// the canonical file in docs/contracts.
func TestEmbeddedSchemaMatchesDocs(t *testing.T) {
	t.Parallel()
	canonical, err := os.ReadFile(schemaPath)
	require.NoError(t, err)
	if *update {
		return // TestUpdateRewritesGeneratedFiles refreshed the copy; this binary embeds the old one
	}
	require.Equal(t, string(canonical), string(contract.JSONSchema()),
		"embedded schema differs from docs/contracts: go test ./modules/promotion/contract -update")

	var doc map[string]any
	require.NoError(t, json.Unmarshal(canonical, &doc))
	require.Equal(t, contract.SchemaID, doc["$id"])
}

// mutateJSON returns the golden "active" event with fn applied to its
// generic JSON form.
func mutateJSON(t *testing.T, fn func(doc map[string]any)) []byte {
	t.Helper()
	wire, err := contract.Marshal(validEnvelope(t))
	require.NoError(t, err)
	return editJSON(t, wire, fn)
}

// editJSON applies fn to the generic form of a JSON object and returns it
// compact, numbers kept as written (1500.00).
func editJSON(tb testing.TB, data []byte, fn func(doc map[string]any)) []byte {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var doc map[string]any
	require.NoError(tb, d.Decode(&doc))
	fn(doc)
	out, err := json.Marshal(doc)
	require.NoError(tb, err)
	return out
}

func payloadOf(doc map[string]any) map[string]any { return doc["payload"].(map[string]any) }

// TestSchemaCompatibilityRules pins the split between what consumers must
// accept (the published schema) and what the producer may emit (the strict
// form), and what neither accepts.
func TestSchemaCompatibilityRules(t *testing.T) {
	t.Parallel()
	s := compileSchemas(t)
	cases := []struct {
		name     string
		mutate   func(doc map[string]any)
		consumer bool // the published schema accepts it
		strict   bool // the producer may emit it
	}{
		{"unchanged", func(map[string]any) {}, true, true},
		{"new optional field in envelope", func(d map[string]any) { d["partitionHint"] = "x" }, true, false},
		{"new optional field in payload", func(d map[string]any) { payloadOf(d)["renewalOf"] = nil }, true, false},
		{"new optional field in target", func(d map[string]any) {
			payloadOf(d)["targets"].([]any)[0].(map[string]any)["slot"] = 1
		}, true, false},
		{"new status value", func(d map[string]any) { payloadOf(d)["status"] = unknownStatus }, true, false},
		{"new package kind", func(d map[string]any) { payloadOf(d)["packageKind"] = unknownPackageKind }, true, false},
		{"new payment status", func(d map[string]any) { payloadOf(d)["paymentStatus"] = unknownPaymentStatus }, true, false},
		{"new target kind", func(d map[string]any) {
			payloadOf(d)["targets"].([]any)[0].(map[string]any)["targetKind"] = unknownTargetKind
		}, true, false},
		{"other contract version", func(d map[string]any) { d["contractVersion"] = 2 }, true, false},
		{"missing messageId", func(d map[string]any) { delete(d, "messageId") }, false, false},
		{"missing payload.version", func(d map[string]any) { delete(payloadOf(d), "version") }, false, false},
		{"missing price.currency.sign", func(d map[string]any) {
			delete(payloadOf(d)["price"].(map[string]any)["currency"].(map[string]any), "sign")
		}, false, false},
		{"amount as string", func(d map[string]any) { payloadOf(d)["price"].(map[string]any)["amount"] = "1500.00" }, false, false},
		{"amount with 3 decimals", func(d map[string]any) { payloadOf(d)["price"].(map[string]any)["amount"] = json.Number("0.001") }, false, false},
		{"negative amount", func(d map[string]any) { payloadOf(d)["price"].(map[string]any)["amount"] = json.Number("-1.00") }, false, false},
		{"amount beyond decimal(14,2)", func(d map[string]any) {
			payloadOf(d)["price"].(map[string]any)["amount"] = json.Number("1000000000000.00")
		}, false, false},
		{"currency other than RUB", func(d map[string]any) { payloadOf(d)["price"].(map[string]any)["currencyId"] = 840 }, false, false},
		{"empty status", func(d map[string]any) { payloadOf(d)["status"] = "" }, false, false},
		{"nil messageId", func(d map[string]any) { d["messageId"] = "00000000-0000-0000-0000-000000000000" }, false, false},
		{"upper-case uuid", func(d map[string]any) { d["messageId"] = "5F0C3A52-8D0E-4A52-9A77-2B7A8F0E6C11" }, false, false},
		{"not a uuid", func(d map[string]any) { payloadOf(d)["tenantId"] = "tenant-1" }, false, false},
		{"time without microseconds", func(d map[string]any) { d["occurredAt"] = "2026-11-23T10:00:00Z" }, false, false},
		{"time with an offset", func(d map[string]any) { payloadOf(d)["endsAt"] = "2026-11-30T13:00:00.123456+03:00" }, false, false},
		{"no targets", func(d map[string]any) { payloadOf(d)["targets"] = []any{} }, false, false},
		{"eleven targets", func(d map[string]any) {
			ts := make([]any, 11)
			for i := range ts {
				ts[i] = map[string]any{"targetKind": "Project", "targetId": "c1a2b3c4-d5e6-4f70-8192-a3b4c5d6e7" + []string{"00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10"}[i]}
			}
			payloadOf(d)["targets"] = ts
		}, false, false},
		{"duplicate target", func(d map[string]any) {
			ts := payloadOf(d)["targets"].([]any)
			payloadOf(d)["targets"] = []any{ts[0], ts[0]}
		}, false, false},
		{"wrong eventType", func(d map[string]any) { d["eventType"] = "pin.catalog.promotions" }, false, false},
		{"boostWeight 0", func(d map[string]any) { payloadOf(d)["boostWeight"] = 0 }, false, false},
		{"version 0", func(d map[string]any) { payloadOf(d)["version"] = 0 }, false, false},
		{"bad package code", func(d map[string]any) { payloadOf(d)["packageCode"] = "Project Boost" }, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := instance(t, mutateJSON(t, tc.mutate))
			if err := s.consumer.Validate(inst); tc.consumer {
				require.NoError(t, err, "consumer-facing schema must accept")
			} else {
				require.Error(t, err, "consumer-facing schema must reject")
			}
			if err := s.strict.Validate(inst); tc.strict {
				require.NoError(t, err, "strict schema must accept")
			} else {
				require.Error(t, err, "strict schema must reject")
			}
		})
	}
}

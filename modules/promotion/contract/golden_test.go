package contract_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// TestGolden pins the wire form of every event the module publishes and
// checks each golden file against the JSON Schema, both as published
// (consumer-facing) and in its strict producer form.
func TestGolden(t *testing.T) {
	t.Parallel()
	s := compileSchemas(t)
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wire, err := contract.Marshal(tc.envelope)
			require.NoError(t, err)
			got := indentJSON(t, wire)
			want, err := os.ReadFile(goldenPath(tc.name))
			require.NoError(t, err, "golden file missing: go test ./modules/promotion/contract -update")
			require.Equal(t, string(want), string(got), "wire form changed; if intended, rerun with -update and review the diff")

			require.NoError(t, s.consumer.Validate(instance(t, want)), "golden vs consumer-facing schema")
			require.NoError(t, s.strict.Validate(instance(t, want)), "golden vs strict producer schema")
			requireNoForbiddenKeys(t, want)
		})
	}
}

// TestGoldenShowsTheWireFormat checks details of the wire form that a byte
// comparison would only catch by accident if the golden were regenerated.
func TestGoldenShowsTheWireFormat(t *testing.T) {
	t.Parallel()
	wire, err := contract.Marshal(goldenCases(t)[0].envelope)
	require.NoError(t, err)
	s := string(wire)
	require.Contains(t, s, `"amount":1500.00,`, "amount is a number with two decimals")
	require.Contains(t, s, `"occurredAt":"2026-11-23T10:00:00.123456Z"`, "RFC 3339 UTC with microseconds")
	require.True(t, strings.HasPrefix(s, `{"messageId":"5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11","eventType":"pin.promotion.purchase-changed","contractVersion":1,`))
	require.NotContains(t, s, "\n", "the record value is compact")
}

// forbiddenKeys must never appear in the event (security table of the
// contract): free text, actor ids (personal data), the database row version.
var forbiddenKeys = []string{"cancelReason", "createdByUserId", "updatedByUserId", "rowVersion"}

// requireNoForbiddenKeys fails when the JSON document has a forbidden key.
func requireNoForbiddenKeys(tb testing.TB, data []byte) {
	tb.Helper()
	require.Empty(tb, forbiddenKeysIn(tb, data))
}

// forbiddenKeysIn walks every object key of the JSON document and returns the
// paths of forbidden ones, ignoring case so that CancelReason is caught too.
func forbiddenKeysIn(tb testing.TB, data []byte) []string {
	tb.Helper()
	var doc any
	require.NoError(tb, json.Unmarshal(data, &doc))
	var found []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch n := v.(type) {
		case map[string]any:
			for k, child := range n {
				for _, bad := range forbiddenKeys {
					if strings.EqualFold(k, bad) {
						found = append(found, path+"."+k)
					}
				}
				walk(path+"."+k, child)
			}
		case []any:
			for _, child := range n {
				walk(path+"[]", child)
			}
		}
	}
	walk("$", doc)
	return found
}

// TestForbiddenKeyCheckCanFail proves the check above catches a planted key,
// however deep and however capitalised.
func TestForbiddenKeyCheckCanFail(t *testing.T) {
	t.Parallel()
	for _, key := range forbiddenKeys {
		planted := strings.ToUpper(key[:1]) + key[1:]
		doc := []byte(`{"payload":{"targets":[{"` + planted + `":"x"}]}}`)
		require.Equal(t, []string{"$.payload.targets[]." + planted}, forbiddenKeysIn(t, doc))
	}
}

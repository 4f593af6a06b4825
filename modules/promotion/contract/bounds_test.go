package contract_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// targetsOf returns n distinct Project targets as the wire carries them.
func targetsOf(n int) []any {
	ts := make([]any, n)
	for i := range ts {
		ts[i] = map[string]any{"targetKind": "Project", "targetId": fmt.Sprintf("c1a2b3c4-d5e6-4f70-8192-%012x", i+1)}
	}
	return ts
}

// TestDecodeRecordDeadLettersWhatTheContractsBoundsRefuse: a record outside
// the bounds is ErrOutOfBounds naming the rule it broke, and the published
// consumer-facing schema refuses it too; what a later additive revision may
// write (an unknown enum value, contract version 2) passes both. Bounds and
// schema never disagree, so a consumer never refuses a record the released
// contract admits.
func TestDecodeRecordDeadLettersWhatTheContractsBoundsRefuse(t *testing.T) {
	t.Parallel()
	s := compileSchemas(t)
	cases := []struct {
		name  string
		rule  string // the field named; "" = the record passes
		spoil func(d map[string]any)
	}{
		{"5000 targets", "payload.targets", func(d map[string]any) { payloadOf(d)["targets"] = targetsOf(5000) }},
		{"11 targets", "payload.targets", func(d map[string]any) { payloadOf(d)["targets"] = targetsOf(11) }},
		{"no targets", "payload.targets", func(d map[string]any) { payloadOf(d)["targets"] = []any{} }},
		{"a target twice", "payload.targets[1]", func(d map[string]any) {
			ts := targetsOf(1)
			payloadOf(d)["targets"] = append(ts, ts[0])
		}},
		{"a nil targetId", "payload.targets[0].targetId", func(d map[string]any) {
			payloadOf(d)["targets"] = []any{map[string]any{"targetKind": "Project", "targetId": "00000000-0000-0000-0000-000000000000"}}
		}},
		{"version 0", "payload.version", func(d map[string]any) { payloadOf(d)["version"] = 0 }},
		{"version -3", "payload.version", func(d map[string]any) { payloadOf(d)["version"] = -3 }},
		{"an empty status", "payload.status", func(d map[string]any) { payloadOf(d)["status"] = "" }},
		{"an empty targetKind", "payload.targets[0].targetKind", func(d map[string]any) {
			payloadOf(d)["targets"] = []any{map[string]any{"targetKind": "", "targetId": "c1a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8"}}
		}},
		{"boostWeight 0", "payload.boostWeight", func(d map[string]any) { payloadOf(d)["boostWeight"] = 0 }},
		{"a nil tenantId", "payload.tenantId", func(d map[string]any) { payloadOf(d)["tenantId"] = "00000000-0000-0000-0000-000000000000" }},
		{"a negative amount", "payload.price.amount", func(d map[string]any) {
			payloadOf(d)["price"].(map[string]any)["amount"] = -1
		}},
		{"another currency", "payload.price.currencyId", func(d map[string]any) {
			payloadOf(d)["price"].(map[string]any)["currencyId"] = 840
		}},
		{"a package code of another shape", "payload.packageCode", func(d map[string]any) { payloadOf(d)["packageCode"] = "Project Boost" }},
		{"contractVersion 0", "contractVersion", func(d map[string]any) { d["contractVersion"] = 0 }},
		{"an unknown status", "", func(d map[string]any) { payloadOf(d)["status"] = unknownStatus }},
		{"an unknown target kind", "", func(d map[string]any) {
			payloadOf(d)["targets"] = []any{map[string]any{"targetKind": unknownTargetKind, "targetId": "c1a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8"}}
		}},
		{"contractVersion 2", "", func(d map[string]any) { d["contractVersion"] = 2 }},
		{"ten targets", "", func(d map[string]any) { payloadOf(d)["targets"] = targetsOf(10) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := goldenRecord(t)
			r.Value = editJSON(t, r.Value, tc.spoil)
			_, err := contract.DecodeRecord(r, nil)
			schemaErr := s.consumer.Validate(instance(t, r.Value))
			if tc.rule == "" {
				require.NoError(t, err)
				require.NoError(t, schemaErr, "the consumer-facing schema admits it too")
				return
			}
			require.ErrorIs(t, err, contract.ErrOutOfBounds)
			var verr *contract.ValidationError
			require.True(t, errors.As(err, &verr), "%v", err)
			require.True(t, verr.Has(tc.rule), "the rule broken is named: %v", err)
			require.Error(t, schemaErr, "the consumer-facing schema refuses it too")
		})
	}
}

// TestBoundsReportThousandsOfTargetsInOneLine: a hostile record's 5000
// targets make one error, not one per target.
func TestBoundsReportThousandsOfTargetsInOneLine(t *testing.T) {
	t.Parallel()
	r := goldenRecord(t)
	r.Value = editJSON(t, r.Value, func(d map[string]any) { payloadOf(d)["targets"] = targetsOf(5000) })
	_, err := contract.DecodeRecord(r, nil)
	var verr *contract.ValidationError
	require.True(t, errors.As(err, &verr), "%v", err)
	require.Equal(t, []contract.FieldError{{Field: "payload.targets", Message: "must have 1 to 10 items, has 5000"}}, verr.Errors)
}

package contract_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// update rewrites the golden files, the embedded schema copy and the
// AsyncAPI examples (TestUpdateRewritesGeneratedFiles):
// go test ./modules/promotion/contract -update
var update = flag.Bool("update", false, "rewrite the golden files, the embedded copy of the JSON Schema and the AsyncAPI examples")

// Paths of the canonical contract documents, relative to this package.
const (
	schemaPath   = "../../../docs/contracts/pin.promotion.purchase-changed.v1.schema.json"
	asyncAPIPath = "../../../docs/contracts/pin.promotion.purchase-changed.v1.asyncapi.yaml"
)

// Fixed ids, so golden files are stable.
var (
	tenantID        = uuid.MustParse("3f1d1c8e-2b7a-4c59-9d3e-6a0f5b2c7e01")
	projectPurchase = uuid.MustParse("8c2d5e7a-1f3b-4a6c-9e8d-0b1a2c3d4e5f")
	objectPurchase  = uuid.MustParse("b7e4a1d2-6c3f-4e8a-9b5d-2f1e0c9a8b7d")
	projectPackage  = uuid.MustParse("0a6b2c4d-8e1f-4a3b-9c5d-7e9f1a2b3c4d")
	objectPackage   = uuid.MustParse("1b7c3d5e-9f2a-4b4c-8d6e-8f0a2b3c4d5e")
	projectA        = uuid.MustParse("c1a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8")
	projectB        = uuid.MustParse("d2b3c4d5-e6f7-4a81-92a3-b4c5d6e7f809")
	propertyObject  = uuid.MustParse("e3c4d5e6-f7a8-4b92-a3b4-c5d6e7f8091a")
)

// mustTime parses an RFC 3339 time or fails the test.
func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(tb, err)
	return t
}

// mustAmount parses a decimal amount or fails the test.
func mustAmount(tb testing.TB, s string) contract.Amount {
	tb.Helper()
	a, err := contract.ParseAmount(s)
	require.NoError(tb, err)
	return a
}

// goldenCase is one event whose wire form is pinned in testdata.
type goldenCase struct {
	name     string
	envelope contract.Envelope
}

// goldenCases are the three transitions the module publishes: activation,
// expiry (of the same purchase, one version later) and cancellation.
func goldenCases(tb testing.TB) []goldenCase {
	tb.Helper()
	active := contract.PurchaseChanged{
		PurchaseID:  projectPurchase,
		TenantID:    tenantID,
		PackageID:   projectPackage,
		PackageCode: "project-boost-week",
		PackageKind: contract.KindProjectBoost,
		Targets: []contract.Target{
			{TargetKind: contract.TargetProject, TargetID: projectA},
			{TargetKind: contract.TargetProject, TargetID: projectB},
		},
		Status:        contract.StatusActive,
		PaymentStatus: contract.PaymentNotRequired,
		BoostWeight:   10,
		StartsAt:      mustTime(tb, "2026-11-23T10:00:00.123456Z"),
		EndsAt:        mustTime(tb, "2026-11-30T10:00:00.123456Z"),
		Price:         contract.Price{Amount: mustAmount(tb, "1500"), CurrencyID: contract.CurrencyIDRUB, Currency: contract.RUBCurrency()},
		Version:       1,
	}
	expired := active
	expired.Status = contract.StatusExpired
	expired.Version = 2

	cancelled := contract.PurchaseChanged{
		PurchaseID:    objectPurchase,
		TenantID:      tenantID,
		PackageID:     objectPackage,
		PackageCode:   "property-object-boost-week",
		PackageKind:   contract.KindPropertyObjectBoost,
		Targets:       []contract.Target{{TargetKind: contract.TargetPropertyObject, TargetID: propertyObject}},
		Status:        contract.StatusCancelled,
		PaymentStatus: contract.PaymentNotRequired,
		BoostWeight:   5,
		StartsAt:      mustTime(tb, "2026-11-24T08:15:00.000001Z"),
		EndsAt:        mustTime(tb, "2026-12-01T08:15:00.000001Z"),
		Price:         contract.Price{Amount: mustAmount(tb, "990.5"), CurrencyID: contract.CurrencyIDRUB, Currency: contract.RUBCurrency()},
		Version:       2,
	}
	return []goldenCase{
		{"active", contract.NewEnvelope(active, uuid.MustParse("5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11"), mustTime(tb, "2026-11-23T10:00:00.123456Z"))},
		{"expired", contract.NewEnvelope(expired, uuid.MustParse("6a1d4b63-9e1f-4b63-8a88-3c8b9a1f7d22"), mustTime(tb, "2026-11-30T10:00:30.5Z"))},
		{"cancelled", contract.NewEnvelope(cancelled, uuid.MustParse("7b2e5c74-af20-4c74-9b99-4d9cab208e33"), mustTime(tb, "2026-11-25T12:30:45.654321Z"))},
	}
}

// validEnvelope is a valid event for tests that change one thing in it.
func validEnvelope(tb testing.TB) contract.Envelope {
	tb.Helper()
	e := goldenCases(tb)[0].envelope
	e.Payload.Targets = append([]contract.Target(nil), e.Payload.Targets...)
	return e
}

// goldenPath is the golden file of one case.
func goldenPath(name string) string {
	return filepath.Join("testdata", "purchase-changed.v1."+name+".golden.json")
}

// indentJSON reformats compact JSON for a golden file; json.Indent only moves
// whitespace, so numbers keep their exact text (1500.00).
func indentJSON(tb testing.TB, compact []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	require.NoError(tb, json.Indent(&buf, compact, "", "  "))
	buf.WriteByte('\n')
	return buf.Bytes()
}

// schemas are the consumer-facing schema as published and its strict
// producer form.
type schemas struct {
	consumer *jsonschema.Schema
	strict   *jsonschema.Schema
}

// compileSchemas compiles the canonical schema file and its strict form, with
// format assertions on (uuid, date-time).
func compileSchemas(tb testing.TB) schemas {
	tb.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	consumer, err := c.Compile(schemaPath)
	require.NoError(tb, err)

	f, err := os.Open(schemaPath)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = f.Close() })
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(tb, err)
	doc = strictSchema(doc)
	sc := jsonschema.NewCompiler()
	sc.AssertFormat()
	require.NoError(tb, sc.AddResource("strict.schema.json", doc))
	strict, err := sc.Compile("strict.schema.json")
	require.NoError(tb, err)
	return schemas{consumer: consumer, strict: strict}
}

// strictSchema turns the consumer-facing schema into what the producer must
// emit today: every object closed (additionalProperties false) and every open
// value (anyOf [closed, open]) narrowed to its closed first branch.
func strictSchema(v any) any {
	switch n := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(n)+1)
		for k, child := range n {
			out[k] = strictSchema(child)
		}
		if anyOf, ok := out["anyOf"].([]any); ok && len(anyOf) > 0 {
			if closed, ok := anyOf[0].(map[string]any); ok {
				delete(out, "anyOf")
				for k, child := range closed {
					out[k] = child
				}
			}
		}
		if _, ok := out["properties"]; ok {
			out["additionalProperties"] = false
		}
		if id, ok := out["$id"].(string); ok {
			out["$id"] = strings.Replace(id, ".schema.json", ".strict.schema.json", 1)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, child := range n {
			out[i] = strictSchema(child)
		}
		return out
	default:
		return v
	}
}

// instance parses JSON the way the validator expects (numbers as json.Number,
// so multipleOf 0.01 is checked exactly).
func instance(tb testing.TB, data []byte) any {
	tb.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	require.NoError(tb, err)
	return v
}

package contract_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/schemacompat"
)

// releasedRoot holds every released revision of the contract, one
// directory each; none ever changes (released/README.md).
const releasedRoot = "released"

// releasedDir holds contract version 1 as first released: the JSON Schema,
// the AsyncAPI document and the golden events.
const releasedDir = releasedRoot + "/v1"

// releasedAsyncAPIs are the AsyncAPI documents released, oldest first: an
// additive revision (v1.1 added the event_origin header) is frozen with the
// change that publishes it, so what it added cannot be taken away later.
var releasedAsyncAPIs = []string{
	releasedDir + "/pin.promotion.purchase-changed.v1.asyncapi.yaml",
	releasedRoot + "/v1.1/pin.promotion.purchase-changed.v1.asyncapi.yaml",
}

// releasedFiles pins every released file, by its path under releasedRoot,
// to its SHA-256, so the copies the gates compare against cannot drift along
// with the current contract.
var releasedFiles = map[string]string{
	"v1/pin.promotion.purchase-changed.v1.asyncapi.yaml":   "206b562c386a689ae3d9eb45992af68c3223db937d8b95227793255ceb7db3b8",
	"v1/pin.promotion.purchase-changed.v1.schema.json":     "4abce345901df8a3cf728048248c7e2a2006fcf57b2943ab496e7540a3c44d45",
	"v1/purchase-changed.v1.active.golden.json":            "9e0de9c71fe0837e6a2185dd9dbe76adfd1d48e14a7e06d03215382cd7c67458",
	"v1/purchase-changed.v1.cancelled.golden.json":         "0985caf4ec727fa79878d58b8a56f51f694c2f3a1c59599d7e592107b6ccf7ef",
	"v1/purchase-changed.v1.expired.golden.json":           "79cfc9f3a1a816a1536533604d606f0ffab2cdc2962ebc1a24d3b22ad271c336",
	"v1.1/pin.promotion.purchase-changed.v1.asyncapi.yaml": "704f6f78a64bce84155d7ce0802e35ae72c4df4d430d8186fb4d7167507365a2",
}

// releasedGoldens are the events released with version 1.
var releasedGoldens = []string{"active", "expired", "cancelled"}

func readReleased(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(releasedDir, name))
	require.NoError(tb, err)
	return data
}

// breakingChangeAdvice is what every compatibility failure ends with: the
// only way a breaking change may ship.
var breakingChangeAdvice = fmt.Sprintf(`Contract version %[1]d admits only additive changes: a new optional property, a new enum value.
A breaking change needs a new contract version instead:
  1. ContractVersion %[2]d, with .v%[2]d schema and AsyncAPI files beside the .v%[1]d ones;
  2. a new topic %[3]s.v%[2]d;
  3. publishing every event to both %[3]s.v%[1]d and .v%[2]d (in one transaction) during the migration;
  4. a deadline by which every consumer reads .v%[2]d;
  5. then a sunset of .v%[1]d.
See docs/contracts/purchase-changed.md, "A breaking change: version 2".`,
	contract.ContractVersion, contract.ContractVersion+1, contract.EventType)

// compatibilityReport is the failure message of the gates: what breaks the
// released copy at released.
func compatibilityReport(what, released string, breaks []string) string {
	return fmt.Sprintf("%s breaks the released contract (%s):\n  %s\n\n%s",
		what, released, strings.Join(breaks, "\n  "), breakingChangeAdvice)
}

func violationStrings(vs []schemacompat.Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

// TestReleasedContractIsFrozen keeps every released revision exactly as
// published: no file added, removed or edited.
func TestReleasedContractIsFrozen(t *testing.T) {
	t.Parallel()
	var names []string
	require.NoError(t, filepath.WalkDir(releasedRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Dir(path) == releasedRoot { // the README is no release
			return err
		}
		rel, err := filepath.Rel(releasedRoot, path)
		names = append(names, filepath.ToSlash(rel))
		return err
	}))
	want := make([]string, 0, len(releasedFiles))
	for name := range releasedFiles {
		want = append(want, name)
	}
	slices.Sort(want)
	slices.Sort(names)
	require.Equal(t, want, names, "released/ holds exactly the files released")
	for name, sum := range releasedFiles {
		data, err := os.ReadFile(filepath.Join(releasedRoot, name))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		require.Equal(t, sum, hex.EncodeToString(got[:]),
			"%s/%s changed: a released contract is never edited; change docs/contracts and, if breaking, release version 2", releasedRoot, name)
	}
}

// TestSchemaKeepsTheReleasedContract is the gate: the current schema, in
// both copies, admits no breaking change against the released one.
func TestSchemaKeepsTheReleasedContract(t *testing.T) {
	t.Parallel()
	released := readReleased(t, "pin.promotion.purchase-changed.v1.schema.json")
	canonical, err := os.ReadFile(schemaPath)
	require.NoError(t, err)
	for what, current := range map[string][]byte{
		"docs/contracts/pin.promotion.purchase-changed.v1.schema.json": canonical,
		"the embedded schema (contract.JSONSchema)":                    contract.JSONSchema(),
	} {
		vs, err := schemacompat.Check(released, current)
		require.NoError(t, err, what)
		if len(vs) > 0 {
			t.Error(compatibilityReport(what, releasedDir, violationStrings(vs)))
		}
	}
}

// TestCompatibilityGateCatchesPlantedViolations breaks the released schema
// once per case and checks the gate names exactly that rule at that field,
// and lets the additive changes through: a gate that could never fail would
// fail here.
func TestCompatibilityGateCatchesPlantedViolations(t *testing.T) {
	t.Parallel()
	released := readReleased(t, "pin.promotion.purchase-changed.v1.schema.json")
	def := func(t *testing.T, doc map[string]any, path ...string) map[string]any {
		t.Helper()
		return at(t, doc["$defs"], path...).(map[string]any)
	}
	payloadProp := func(t *testing.T, doc map[string]any, name string) map[string]any {
		t.Helper()
		return def(t, doc, "PurchaseChanged", "properties", name)
	}
	openEnum := func(t *testing.T, doc map[string]any, name string) map[string]any {
		t.Helper()
		return at(t, doc["$defs"], name, "anyOf").([]any)[0].(map[string]any)
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, doc map[string]any)
		want   []string // "rule path"; none = compatible
	}{
		// Allowed within version 1.
		{"new optional property in the payload", func(t *testing.T, doc map[string]any) {
			def(t, doc, "PurchaseChanged", "properties")["renewalOf"] = map[string]any{"$ref": "#/$defs/Uuid"}
		}, nil},
		{"new optional property in the envelope", func(t *testing.T, doc map[string]any) {
			doc["properties"].(map[string]any)["partitionHint"] = map[string]any{"type": "integer"}
		}, nil},
		{"new status value", func(t *testing.T, doc map[string]any) {
			e := openEnum(t, doc, "Status")
			e["enum"] = append(e["enum"].([]any), unknownStatus)
		}, nil},
		{"new target kind", func(t *testing.T, doc map[string]any) {
			e := openEnum(t, doc, "TargetKind")
			e["enum"] = append(e["enum"].([]any), unknownTargetKind)
		}, nil},
		{"descriptions edited", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "boostWeight")["description"] = "Weight."
			doc["title"] = "renamed"
		}, nil},
		{"definition inlined", func(t *testing.T, doc map[string]any) {
			props := def(t, doc, "PurchaseChanged", "properties")
			inline := map[string]any{}
			for k, v := range def(t, doc, "Uuid") {
				inline[k] = v
			}
			props["packageId"] = inline
		}, nil},

		// Breaking.
		{"property removed", func(t *testing.T, doc map[string]any) {
			delete(def(t, doc, "PurchaseChanged", "properties"), "boostWeight")
			pc := def(t, doc, "PurchaseChanged")
			pc["required"] = slices.DeleteFunc(pc["required"].([]any), func(v any) bool { return v == "boostWeight" })
		}, []string{"property-removed $.payload.boostWeight"}},
		{"property renamed", func(t *testing.T, doc map[string]any) {
			props := def(t, doc, "PurchaseChanged", "properties")
			props["weight"] = props["boostWeight"]
			delete(props, "boostWeight")
			pc := def(t, doc, "PurchaseChanged")
			req := pc["required"].([]any)
			req[slices.Index(req, any("boostWeight"))] = "weight"
		}, []string{"property-removed $.payload.boostWeight", "property-made-required $.payload.weight"}},
		{"boostWeight integer to number", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "boostWeight")["type"] = "number"
		}, []string{"type-changed $.payload.boostWeight"}},
		{"version integer to string", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "version")["type"] = "string"
		}, []string{"type-changed $.payload.version"}},
		{"new required property", func(t *testing.T, doc map[string]any) {
			cur := def(t, doc, "Currency")
			cur["properties"].(map[string]any)["symbol"] = map[string]any{"type": "string"}
			cur["required"] = append(cur["required"].([]any), "symbol")
		}, []string{"property-made-required $.payload.price.currency.symbol"}},
		{"required made optional", func(t *testing.T, doc map[string]any) {
			cur := def(t, doc, "Currency")
			cur["required"] = []any{"isoCode", "name"}
		}, []string{"property-made-optional $.payload.price.currency.sign"}},
		{"status value Pending removed", func(t *testing.T, doc map[string]any) {
			openEnum(t, doc, "Status")["enum"] = []any{"Active", "Expired", "Cancelled"}
		}, []string{"enum-value-removed $.payload.status"}},
		{"target kind Post removed", func(t *testing.T, doc map[string]any) {
			openEnum(t, doc, "TargetKind")["enum"] = []any{"Project", "PropertyObject"}
		}, []string{"enum-value-removed $.payload.targets[*].targetKind"}},
		{"open enum closed", func(t *testing.T, doc map[string]any) {
			st := def(t, doc, "Status")
			st["anyOf"] = st["anyOf"].([]any)[:1]
		}, []string{"schema-changed $.payload.status"}},
		{"eventType const changed", func(t *testing.T, doc map[string]any) {
			at(t, doc, "properties", "eventType").(map[string]any)["const"] = "pin.promotion.purchase-updated"
		}, []string{"const-changed $.eventType"}},
		{"format added", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "packageCode")["format"] = "hostname"
		}, []string{"constraint-narrowed $.payload.packageCode"}},
		{"format changed", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Timestamp")["format"] = "date"
		}, []string{"constraint-narrowed $.occurredAt", "constraint-narrowed $.payload.endsAt", "constraint-narrowed $.payload.startsAt"}},
		{"pattern added", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Currency", "properties", "name")["pattern"] = "^[А-Яа-я ]+$"
		}, []string{"constraint-narrowed $.payload.price.currency.name"}},
		{"pattern changed", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "packageCode")["pattern"] = "^[a-z]+(-[a-z]+)*$"
		}, []string{"constraint-narrowed $.payload.packageCode"}},
		{"minimum raised", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "boostWeight")["minimum"] = json.Number("2")
		}, []string{"constraint-narrowed $.payload.boostWeight"}},
		{"maximum added", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "boostWeight")["maximum"] = json.Number("100")
		}, []string{"constraint-narrowed $.payload.boostWeight"}},
		{"maximum lowered", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Price", "properties", "amount")["maximum"] = json.Number("99999999.99")
		}, []string{"constraint-narrowed $.payload.price.amount"}},
		{"multipleOf coarser", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Price", "properties", "amount")["multipleOf"] = json.Number("0.1")
		}, []string{"constraint-narrowed $.payload.price.amount"}},
		{"minLength raised", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Currency", "properties", "sign")["minLength"] = json.Number("2")
		}, []string{"constraint-narrowed $.payload.price.currency.sign"}},
		{"maxLength added", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Currency", "properties", "name")["maxLength"] = json.Number("16")
		}, []string{"constraint-narrowed $.payload.price.currency.name"}},
		{"minItems raised", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "targets")["minItems"] = json.Number("2")
		}, []string{"constraint-narrowed $.payload.targets"}},
		{"maxItems lowered", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "targets")["maxItems"] = json.Number("5")
		}, []string{"constraint-narrowed $.payload.targets"}},
		{"maxItems raised", func(t *testing.T, doc map[string]any) {
			payloadProp(t, doc, "targets")["maxItems"] = json.Number("20")
		}, []string{"constraint-widened $.payload.targets"}},
		{"minimum dropped", func(t *testing.T, doc map[string]any) {
			delete(payloadProp(t, doc, "version"), "minimum")
		}, []string{"constraint-widened $.payload.version"}},
		{"additionalProperties closed", func(t *testing.T, doc map[string]any) {
			def(t, doc, "Currency")["additionalProperties"] = false
		}, []string{"additional-properties-closed $.payload.price.currency"}},
		{"envelope closed", func(t *testing.T, doc map[string]any) {
			doc["additionalProperties"] = false
		}, []string{"additional-properties-closed $"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			current := editJSON(t, released, func(doc map[string]any) { tc.mutate(t, doc) })
			vs, err := schemacompat.Check(released, current)
			require.NoError(t, err)
			var got []string
			for _, v := range vs {
				got = append(got, string(v.Rule)+" "+v.Path)
			}
			require.ElementsMatch(t, tc.want, got, "%v", violationStrings(vs))
		})
	}
}

// TestCompatibilityReportSaysWhatABreakingChangeNeeds pins the failure
// message: each break with its rule and field, then the version-2 procedure.
func TestCompatibilityReportSaysWhatABreakingChangeNeeds(t *testing.T) {
	t.Parallel()
	released := readReleased(t, "pin.promotion.purchase-changed.v1.schema.json")
	current := strings.Replace(string(released), `"type": "integer",
          "minimum": 1
        },
        "startsAt"`, `"type": "number",
          "minimum": 1
        },
        "startsAt"`, 1)
	require.NotEqual(t, string(released), current)
	vs, err := schemacompat.Check(released, []byte(current))
	require.NoError(t, err)
	msg := compatibilityReport("the schema", releasedDir, violationStrings(vs))
	for _, want := range []string{
		`type-changed at $.payload.boostWeight: type "integer" became "number"`,
		"ContractVersion 2", "pin.promotion.purchase-changed.v2", "both", "deadline", "sunset of .v1",
	} {
		require.Contains(t, msg, want)
	}
}

// TestReleasedEventsStayReadable: every released event, and the same event
// with what an additive revision may add (an unknown enum value, unknown
// fields), validates against the current schema and decodes with the current
// decoder.
func TestReleasedEventsStayReadable(t *testing.T) {
	t.Parallel()
	s := compileSchemas(t)
	variants := []struct {
		name   string
		edit   func(doc map[string]any)
		warned string // the field Decode warns about, if any
	}{
		{"as released", func(map[string]any) {}, ""},
		{"unknown status", func(d map[string]any) { payloadOf(d)["status"] = unknownStatus }, "payload.status"},
		{"unknown target kind", func(d map[string]any) {
			payloadOf(d)["targets"].([]any)[0].(map[string]any)["targetKind"] = unknownTargetKind
		}, "payload.targets[0].targetKind"},
		{"unknown fields", func(d map[string]any) {
			d["partitionHint"] = json.Number("7")
			payloadOf(d)["renewalOf"] = map[string]any{"purchaseId": "x"}
			payloadOf(d)["targets"].([]any)[0].(map[string]any)["slot"] = json.Number("1")
		}, ""},
	}
	for _, name := range releasedGoldens {
		released := readReleased(t, "purchase-changed.v1."+name+".golden.json")
		for _, v := range variants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				data := editJSON(t, released, v.edit)
				require.NoError(t, s.consumer.Validate(instance(t, data)), "current schema")

				logger, logs := newLogCapture(t)
				got, err := contract.Decode(data, logger)
				require.NoError(t, err, "current decoder")
				var raw map[string]any
				require.NoError(t, json.Unmarshal(data, &raw))
				require.Equal(t, raw["messageId"], got.MessageID.String())
				require.Equal(t, payloadOf(raw)["status"], string(got.Payload.Status))

				recs := logs.All(t)
				if v.warned == "" {
					require.Empty(t, recs)
					requireFieldsSurvive(t, released, got)
					return
				}
				require.Len(t, recs, 1)
				require.Equal(t, v.warned, recs[0]["field"])
			})
		}
	}
}

// requireFieldsSurvive checks that every field of a released event comes out
// of Decode and Marshal with the value it went in with; fields a later
// revision adds may come out too.
func requireFieldsSurvive(t *testing.T, released []byte, decoded contract.Envelope) {
	t.Helper()
	again, err := contract.Marshal(decoded)
	require.NoError(t, err)
	want := map[string]any{}
	require.NoError(t, json.Unmarshal(editJSON(t, released, func(map[string]any) {}), &want))
	got := map[string]any{}
	require.NoError(t, json.Unmarshal(editJSON(t, again, func(map[string]any) {}), &got))
	var walk func(path string, w, g any)
	walk = func(path string, w, g any) {
		switch wv := w.(type) {
		case map[string]any:
			gv, ok := g.(map[string]any)
			require.True(t, ok, "%s is not an object after decoding", path)
			for k, child := range wv {
				walk(path+"."+k, child, gv[k])
			}
		case []any:
			gv, ok := g.([]any)
			require.True(t, ok && len(gv) == len(wv), "%s changed length after decoding", path)
			for i := range wv {
				walk(fmt.Sprintf("%s[%d]", path, i), wv[i], gv[i])
			}
		default:
			require.Equal(t, w, g, "%s after decoding", path)
		}
	}
	walk("$", want, got)
}

// asyncAPIBreaks lists what a consumer of the released AsyncAPI document
// would notice in the current one: the channel address and Kafka topic, the
// content type, the payload's schema, the record key and the headers.
func asyncAPIBreaks(tb testing.TB, released, current asyncAPIDoc) []string {
	tb.Helper()
	var breaks []string
	same := func(what string, path ...string) {
		r, c := at(tb, map[string]any(released), path...), at(tb, map[string]any(current), path...)
		if !reflect.DeepEqual(r, c) {
			breaks = append(breaks, fmt.Sprintf("%s: %v became %v", what, r, c))
		}
	}
	same("channel address", "channels", "purchaseChanged", "address")
	same("channel kafka topic", "channels", "purchaseChanged", "bindings", "kafka", "topic")
	same("content type", "components", "messages", "purchaseChanged", "contentType")
	same("payload schema", "components", "messages", "purchaseChanged", "payload", "$ref")
	same("operation action", "operations", "publishPurchaseChanged", "action")
	schema := func(what string, path ...string) {
		r, err := json.Marshal(at(tb, map[string]any(released), path...))
		require.NoError(tb, err)
		c, err := json.Marshal(at(tb, map[string]any(current), path...))
		require.NoError(tb, err)
		vs, err := schemacompat.Check(r, c)
		require.NoError(tb, err, what)
		for _, v := range vs {
			breaks = append(breaks, what+": "+v.String())
		}
	}
	schema("message key", "components", "messages", "purchaseChanged", "bindings", "kafka", "key")
	schema("headers", "components", "messages", "purchaseChanged", "headers")
	return breaks
}

// asyncAPIGate is the AsyncAPI gate: the breaks of current against each
// released AsyncAPI document, as failure reports; none when it passes.
func asyncAPIGate(tb testing.TB, current asyncAPIDoc) []string {
	tb.Helper()
	var reports []string
	for _, path := range releasedAsyncAPIs {
		if breaks := asyncAPIBreaks(tb, loadAsyncAPI(tb, path), current); len(breaks) > 0 {
			reports = append(reports, compatibilityReport(asyncAPIPath, path, breaks))
		}
	}
	return reports
}

// TestAsyncAPIKeepsTheReleasedContract runs the AsyncAPI gate on the
// current document.
func TestAsyncAPIKeepsTheReleasedContract(t *testing.T) {
	t.Parallel()
	for _, report := range asyncAPIGate(t, loadAsyncAPI(t, asyncAPIPath)) {
		t.Error(report)
	}
}

// TestAsyncAPIGateHoldsTheEventOriginHeader: the event_origin header, added
// by revision 1.1, passes the gate as additive against version 1, and any
// later change that consumers skipping snapshots would notice fails it —
// against revision 1.1, since version 1 had no such header.
func TestAsyncAPIGateHoldsTheEventOriginHeader(t *testing.T) {
	t.Parallel()
	origin := func(t *testing.T, doc asyncAPIDoc) map[string]any {
		t.Helper()
		return at(t, map[string]any(doc), "components", "messages", "purchaseChanged", "headers", "properties", contract.HeaderEventOrigin).(map[string]any)
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, doc asyncAPIDoc)
		want   string // the break reported against v1.1; "" = compatible
		alsoV1 bool   // version 1 flags it too
	}{
		{"description edited", func(t *testing.T, doc asyncAPIDoc) { origin(t, doc)["description"] = "Why." }, "", false},
		{"header removed", func(t *testing.T, doc asyncAPIDoc) {
			delete(at(t, map[string]any(doc), "components", "messages", "purchaseChanged", "headers", "properties").(map[string]any),
				contract.HeaderEventOrigin)
		}, "headers: property-removed at $.event_origin", false},
		{"value snapshot removed", func(t *testing.T, doc asyncAPIDoc) { origin(t, doc)["enum"] = []any{"transition"} },
			`headers: enum-value-removed at $.event_origin: value "snapshot" removed`, false},
		{"value added", func(t *testing.T, doc asyncAPIDoc) {
			origin(t, doc)["enum"] = []any{"transition", "snapshot", "backfill"}
		},
			`headers: constraint-widened at $.event_origin: value "backfill" added`, false},
		{"header made required", func(t *testing.T, doc asyncAPIDoc) {
			h := at(t, map[string]any(doc), "components", "messages", "purchaseChanged", "headers").(map[string]any)
			h["required"] = append(h["required"].([]any), contract.HeaderEventOrigin)
		}, "headers: property-made-required at $.event_origin", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			current := loadAsyncAPI(t, asyncAPIPath)
			tc.mutate(t, current)
			againstV1 := asyncAPIBreaks(t, loadAsyncAPI(t, releasedAsyncAPIs[0]), current)
			require.Equal(t, tc.alsoV1, len(againstV1) > 0, "against version 1, which had no event_origin: %v", againstV1)
			reports := asyncAPIGate(t, current)
			if tc.want == "" {
				require.Empty(t, reports)
				return
			}
			require.NotEmpty(t, reports, "the gate must flag it")
			last := reports[len(reports)-1]
			require.Contains(t, last, releasedAsyncAPIs[1])
			require.Contains(t, last, tc.want)
		})
	}
}

// TestAsyncAPIGateCatchesPlantedViolations breaks the released AsyncAPI
// document once per case.
func TestAsyncAPIGateCatchesPlantedViolations(t *testing.T) {
	t.Parallel()
	path := releasedAsyncAPIs[0]
	msg := func(t *testing.T, doc asyncAPIDoc) map[string]any {
		t.Helper()
		return at(t, map[string]any(doc), "components", "messages", "purchaseChanged").(map[string]any)
	}
	header := func(t *testing.T, doc asyncAPIDoc, name string) map[string]any {
		t.Helper()
		return at(t, msg(t, doc), "headers", "properties", name).(map[string]any)
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, doc asyncAPIDoc)
		want   []string // a prefix of each break, in order; none = compatible
	}{
		{"new optional header", func(t *testing.T, doc asyncAPIDoc) {
			at(t, msg(t, doc), "headers", "properties").(map[string]any)["tenant_id"] = map[string]any{"type": "string"}
		}, nil},
		{"channel address", func(t *testing.T, doc asyncAPIDoc) {
			at(t, map[string]any(doc), "channels", "purchaseChanged").(map[string]any)["address"] = "pin.promotion.purchase-changed"
		}, []string{"channel address: pin.promotion.purchase-changed.v1 became pin.promotion.purchase-changed"}},
		{"kafka topic", func(t *testing.T, doc asyncAPIDoc) {
			at(t, map[string]any(doc), "channels", "purchaseChanged", "bindings", "kafka").(map[string]any)["topic"] = "promotions"
		}, []string{"channel kafka topic:"}},
		{"payload schema", func(t *testing.T, doc asyncAPIDoc) {
			at(t, msg(t, doc), "payload").(map[string]any)["$ref"] = "./other.schema.json"
		}, []string{"payload schema:"}},
		{"key format", func(t *testing.T, doc asyncAPIDoc) {
			delete(at(t, msg(t, doc), "bindings", "kafka", "key").(map[string]any), "format")
		}, []string{"message key: constraint-widened at $: format"}},
		{"key type", func(t *testing.T, doc asyncAPIDoc) {
			at(t, msg(t, doc), "bindings", "kafka", "key").(map[string]any)["type"] = "integer"
		}, []string{"message key: type-changed at $"}},
		{"header removed", func(t *testing.T, doc asyncAPIDoc) {
			delete(at(t, msg(t, doc), "headers", "properties").(map[string]any), contract.HeaderCorrelationID)
		}, []string{"headers: property-removed at $.correlation_id"}},
		{"header made required", func(t *testing.T, doc asyncAPIDoc) {
			h := at(t, msg(t, doc), "headers").(map[string]any)
			h["required"] = append(h["required"].([]any), contract.HeaderTraceparent)
		}, []string{"headers: property-made-required at $.traceparent"}},
		{"header value changed", func(t *testing.T, doc asyncAPIDoc) {
			header(t, doc, contract.HeaderContractVersion)["const"] = "2"
		}, []string{"headers: const-changed at $.contract_version"}},
		{"header constraint narrowed", func(t *testing.T, doc asyncAPIDoc) {
			header(t, doc, contract.HeaderCorrelationID)["maxLength"] = 36
		}, []string{"headers: constraint-narrowed at $.correlation_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			released, current := loadAsyncAPI(t, path), loadAsyncAPI(t, path)
			tc.mutate(t, current)
			breaks := asyncAPIBreaks(t, released, current)
			require.Len(t, breaks, len(tc.want), "%v", breaks)
			for i, want := range tc.want {
				require.True(t, strings.HasPrefix(breaks[i], want), "want %q, got %q", want, breaks[i])
			}
		})
	}
}

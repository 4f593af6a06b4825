package contract_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// asyncAPIDoc is the AsyncAPI document as generic data, with helpers to walk
// it.
type asyncAPIDoc map[string]any

// loadAsyncAPI reads the AsyncAPI document at path.
func loadAsyncAPI(tb testing.TB, path string) asyncAPIDoc {
	tb.Helper()
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	var doc map[string]any
	require.NoError(tb, yaml.Unmarshal(data, &doc))
	return doc
}

// at follows a path of map keys and returns the node, failing on a miss.
func at(tb testing.TB, node any, path ...string) any {
	tb.Helper()
	for i, k := range path {
		m, ok := node.(map[string]any)
		require.True(tb, ok, "%s is not a map", strings.Join(path[:i], "."))
		node, ok = m[k]
		require.True(tb, ok, "missing %s", strings.Join(path[:i+1], "."))
	}
	return node
}

// resolveLocal follows a local reference (#/a/b) in doc.
func resolveLocal(tb testing.TB, doc asyncAPIDoc, ref any) any {
	tb.Helper()
	m, ok := ref.(map[string]any)
	require.True(tb, ok, "not a reference object: %v", ref)
	s, ok := m["$ref"].(string)
	require.True(tb, ok && strings.HasPrefix(s, "#/"), "not a local $ref: %v", ref)
	return at(tb, map[string]any(doc), strings.Split(strings.TrimPrefix(s, "#/"), "/")...)
}

// toJSON turns YAML-decoded data into the validator's representation.
func toJSON(tb testing.TB, v any) any {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	return instance(tb, b)
}

// TestAsyncAPIDocument checks the AsyncAPI document against the contract:
// version, channel address, the operation that sends on it, the payload
// reference to the JSON Schema, the Kafka key and the headers.
func TestAsyncAPIDocument(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t, asyncAPIPath)
	require.Equal(t, "3.0.0", doc["asyncapi"])

	channel := at(t, map[string]any(doc), "channels", "purchaseChanged")
	require.Equal(t, contract.Topic, at(t, channel, "address"))
	require.Equal(t, contract.Topic, at(t, channel, "bindings", "kafka", "topic"))
	for name, server := range at(t, map[string]any(doc), "servers").(map[string]any) {
		require.Equal(t, "kafka", at(t, server, "protocol"), "server %s", name)
	}

	op := at(t, map[string]any(doc), "operations", "publishPurchaseChanged")
	require.Equal(t, "send", at(t, op, "action"))
	require.Equal(t, channel, resolveLocal(t, doc, at(t, op, "channel")))
	opMessages := at(t, op, "messages").([]any)
	require.Len(t, opMessages, 1)
	msg := resolveLocal(t, doc, resolveLocal(t, doc, opMessages[0]))
	require.Equal(t, at(t, map[string]any(doc), "components", "messages", "purchaseChanged"), msg)
	require.Equal(t, "application/json", at(t, msg, "contentType"))

	// The payload is the canonical schema file, not a copy.
	ref := at(t, msg, "payload", "$ref").(string)
	resolved := filepath.Join(filepath.Dir(asyncAPIPath), ref)
	require.Equal(t, filepath.Clean(schemaPath), filepath.Clean(resolved))
	_, err := os.Stat(resolved)
	require.NoError(t, err)

	key := at(t, msg, "bindings", "kafka", "key")
	require.Equal(t, "string", at(t, key, "type"))
	require.Equal(t, "uuid", at(t, key, "format"))

	headers := at(t, msg, "headers")
	var names []string
	for name := range at(t, headers, "properties").(map[string]any) {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{contract.HeaderContractVersion, contract.HeaderCorrelationID, contract.HeaderEventType,
		contract.HeaderMessageID, contract.HeaderTraceparent, contract.HeaderEventOrigin}
	slices.Sort(want)
	require.Equal(t, want, names, "headers documented = header constants")
	require.Equal(t, contract.EventType, at(t, headers, "properties", contract.HeaderEventType, "const"))
	require.Equal(t, "1", at(t, headers, "properties", contract.HeaderContractVersion, "const"))
	origin := at(t, headers, "properties", contract.HeaderEventOrigin, "description").(string)
	require.Contains(t, strings.Join(strings.Fields(origin), " "), "a redelivery of the purchase's last event",
		"a snapshot redelivers (ADR 0012), and the document says so")
	require.NotContains(t, origin, "new messageId")
}

// TestAsyncAPIExamples validates every example's payload against the JSON
// Schema (and its strict form), its headers against the headers schema, and
// keeps each example equal to the golden file of the same name.
func TestAsyncAPIExamples(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t, asyncAPIPath)
	s := compileSchemas(t)
	msg := at(t, map[string]any(doc), "components", "messages", "purchaseChanged")

	hc := jsonschema.NewCompiler()
	hc.AssertFormat()
	require.NoError(t, hc.AddResource("headers.json", toJSON(t, at(t, msg, "headers"))))
	headerSchema, err := hc.Compile("headers.json")
	require.NoError(t, err)

	examples := at(t, msg, "examples").([]any)
	require.NotEmpty(t, examples)
	for _, ex := range examples {
		name := at(t, ex, "name").(string)
		payload := toJSON(t, at(t, ex, "payload"))
		require.NoError(t, s.consumer.Validate(payload), "example %s vs schema", name)
		require.NoError(t, s.strict.Validate(payload), "example %s vs strict schema", name)

		headers := at(t, ex, "headers").(map[string]any)
		require.NoError(t, headerSchema.Validate(toJSON(t, headers)), "example %s headers", name)
		require.Equal(t, at(t, ex, "payload", "messageId"), headers[contract.HeaderMessageID], "example %s: message_id = messageId", name)

		golden, err := os.ReadFile(goldenPath(name))
		require.NoError(t, err, "example %s has no golden file of the same name", name)
		var want, got any
		require.NoError(t, json.Unmarshal(golden, &want))
		b, err := json.Marshal(at(t, ex, "payload"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, want, got, "example %s differs from its golden file", name)
	}
}

package testbed

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RequireValidJSON fails tb unless doc is valid by the JSON Schema schema
// (formats asserted): how a test holds an event it read to its contract,
// e.g. RequireValidJSON(t, contract.JSONSchema(), record.Value).
func RequireValidJSON(tb testing.TB, schema, doc []byte) {
	tb.Helper()
	parsedSchema, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		tb.Fatalf("testbed: read the schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", parsedSchema); err != nil {
		tb.Fatalf("testbed: add the schema: %v", err)
	}
	compiled, err := c.Compile("schema.json")
	if err != nil {
		tb.Fatalf("testbed: compile the schema: %v", err)
	}
	parsedDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		tb.Fatalf("testbed: %s is not JSON: %v", doc, err)
	}
	if err := compiled.Validate(parsedDoc); err != nil {
		tb.Fatalf("testbed: %s is not valid by the schema: %v", doc, err)
	}
}

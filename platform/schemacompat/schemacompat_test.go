package schemacompat_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/schemacompat"
)

// base has what the contract schemas do not: an optional property, a
// closed enum, a recursive definition and a schema-valued
// additionalProperties.
const base = `{
  "type": "object",
  "required": ["id"],
  "properties": {
    "id": {"type": "string"},
    "note": {"type": "string", "maxLength": 10},
    "level": {"enum": ["low", "high"]},
    "tree": {"$ref": "#/$defs/Node"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}}
  },
  "$defs": {
    "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}, "size": {"type": "integer"}}}
  }
}`

func violations(t *testing.T, released, current string) []string {
	t.Helper()
	vs, err := schemacompat.Check([]byte(released), []byte(current))
	require.NoError(t, err)
	var got []string
	for _, v := range vs {
		got = append(got, string(v.Rule)+" "+v.Path)
	}
	return got
}

// TestCheckCasesTheContractCannotShow covers the rules on shapes the
// contract's own schema lacks; the contract package plants violations in the
// real schema.
func TestCheckCasesTheContractCannotShow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, current string
		want          []string
	}{
		{"unchanged", base, nil},
		{"optional made required", replace(t, base, `"required": ["id"]`, `"required": ["id", "note"]`),
			[]string{"property-made-required $.note"}},
		{"closed enum extended", replace(t, base, `["low", "high"]`, `["low", "high", "max"]`),
			[]string{"constraint-widened $.level"}},
		{"closed enum shrunk", replace(t, base, `["low", "high"]`, `["low"]`),
			[]string{"enum-value-removed $.level"}},
		{"change inside a recursive definition", replace(t, base, `"size": {"type": "integer"}`, `"size": {"type": "number"}`),
			[]string{"type-changed $.tree.size"}},
		{"additional properties narrowed", replace(t, base, `"additionalProperties": {"type": "string"}`, `"additionalProperties": {"type": "string", "minLength": 1}`),
			[]string{"constraint-narrowed $.labels.*"}},
		{"additional properties closed from a schema", replace(t, base, `"additionalProperties": {"type": "string"}`, `"additionalProperties": false`),
			[]string{"additional-properties-closed $.labels"}},
		{"additional properties opened", replace(t, base, `"additionalProperties": {"type": "string"}`, `"additionalProperties": true`),
			[]string{"constraint-widened $.labels"}},
		{"maxLength dropped", replace(t, base, `"type": "string", "maxLength": 10`, `"type": "string"`),
			[]string{"constraint-widened $.note"}},
		{"unmodelled keyword", replace(t, base, `"id": {"type": "string"}`, `"id": {"type": "string", "contentEncoding": "base64"}`),
			[]string{"schema-changed $.id"}},
		{"definition inlined", replace(t, base, `"tree": {"$ref": "#/$defs/Node"}`,
			`"tree": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}, "size": {"type": "integer"}}}`), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, violations(t, base, tc.current))
		})
	}
}

// TestCheckRefusesWhatItCannotRead: an unreadable schema is an error, never
// a silent pass.
func TestCheckRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for name, current := range map[string]string{
		"not JSON":         `{`,
		"not an object":    `[]`,
		"remote reference": `{"properties": {"id": {"$ref": "https://example.com/id.json"}}}`,
		"dangling":         `{"properties": {"id": {"$ref": "#/$defs/Missing"}}}`,
		"self reference":   `{"properties": {"id": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}}`,
	} {
		_, err := schemacompat.Check([]byte(`{"properties": {"id": {}}}`), []byte(current))
		require.Error(t, err, name)
	}
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Contains(t, s, old)
	return strings.Replace(s, old, new, 1)
}

package contract

import (
	_ "embed"
)

// SchemaID is the $id of the contract's JSON Schema.
const SchemaID = "https://pin.dev/contracts/pin.promotion.purchase-changed.v1.schema.json"

// schemaJSON is a byte-for-byte copy of the canonical
// docs/contracts/pin.promotion.purchase-changed.v1.schema.json (go:embed
// cannot reach outside the package); a test keeps the two identical and
// `go test ./modules/promotion/contract -update` refreshes this copy.
//
//go:embed pin.promotion.purchase-changed.v1.schema.json
var schemaJSON []byte

// JSONSchema returns the contract's JSON Schema (draft 2020-12), so a
// consumer can validate records in its own tests without a path into this
// repository. The schema is consumer-facing: it admits fields and enum values
// a later additive revision may add.
func JSONSchema() []byte {
	return append([]byte(nil), schemaJSON...)
}

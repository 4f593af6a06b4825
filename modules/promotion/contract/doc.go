// Package contract is the integration-event contract of the promotion module:
// the event pin.promotion.purchase-changed (contract version 1) that the
// module publishes to Kafka topic pin.promotion.purchase-changed.v1 on every
// status transition of a promotion purchase.
//
// It is the only package of the promotion module that another module (or a
// consumer service written in Go) may import, so it depends on nothing but the
// standard library, google/uuid and shopspring/decimal.
//
// Producers build an event with NewEnvelope and serialise it with Marshal,
// which refuses anything the contract does not allow. Consumers read a record
// value with Decode, which is lenient in the ways the compatibility rules
// require: unknown enum values, another contract version and unknown fields
// are tolerated (with a warning where the rules ask for one), while missing
// required fields are an error.
//
// The canonical description is docs/contracts/purchase-changed.md, with the
// JSON Schema and the AsyncAPI document next to it; JSONSchema returns an
// embedded copy of that schema.
package contract

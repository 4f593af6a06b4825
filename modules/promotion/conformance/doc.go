// Package conformance is `pin contract verify`: it runs a consumer of
// pin.promotion.purchase-changed as a process, in any language, through the
// contract's scenarios (package scenarios) on a Kafka-protocol broker, and
// judges what the consumer did against what the contract allows. cmd/pin
// parses the flags and calls Verify. ADR 0022 and ADR 0028 say what it
// checks and why.
package conformance

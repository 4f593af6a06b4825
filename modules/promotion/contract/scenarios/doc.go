// Package scenarios holds the conformance kit's scenarios as data: one JSON
// file each in this directory — the records as the producer writes them
// (key, headers, value) and the side effects a consumer may make — and the
// rules that judge a consumer's effects (Judge). contracttest drives a Go
// handler through them; `pin contract verify` a consumer process in any
// language; a team may replay the files in its own unit tests.
//
// Like the contract, it depends on nothing but the standard library,
// google/uuid and shopspring/decimal, and not on package testing.
package scenarios

// Package promotiontest holds the fixtures that the promotion module's
// tests share: packages and purchases stored straight into a testbed
// database, purchases made due, the outbox read back as events, and a log
// sink the tests can search.
//
// It is test support only: import it from _test.go files, never from code
// that ships (it imports package testing and fails tests through
// testing.TB). It imports no package that imports internal/adapters, so
// adapters' own internal tests can use it without an import cycle; wiring
// the whole module therefore stays with the tests of package promotion.
//
// Every helper takes testing.TB and calls tb.Helper(). The rows they write
// live in the test's own database (testbed.NewDatabase), which is dropped
// when the test ends; anything else a helper starts is stopped through
// tb.Cleanup.
package promotiontest

// Package expirebench measures the expiry cycle on real PostgreSQL: one batch
// of the module against the same work done by one hand-written SQL
// statement (the bound), and the drain of a backlog by one and by two
// instances. It holds only tests and benchmarks; `make bench`
// (scripts/bench.sh) runs them and docs/performance.md records the
// figures.
//
// The package lives inside modules/promotion so that it can drive the cycle
// through the same internal app and adapters code that the runner and
// `pin expire-promotions --once` use.
package expirebench

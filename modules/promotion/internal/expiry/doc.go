// Package expiry is the promotion module's expiry job, in one place and one
// concern a file: cycle.go runs a cycle, batch.go is one batch's policy,
// poison.go isolates the rows that keep failing, settings.go and stop.go
// bound it, store.go declares the storage it needs (implemented by the
// adapters package, beside the purchase transition it shares), runner.go
// schedules it as a host.Runner, and observer.go declares what it reports,
// which the telemetry subpackage turns into logs, metrics and spans. The
// subpackages expireslo and expirebench hold its SLO test and benchmarks.
//
// The package itself imports no Prometheus or OpenTelemetry
// (archrules.ExpiryReportsThroughItsObserver).
package expiry

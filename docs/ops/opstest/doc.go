// Package opstest holds the tests of the operations files in docs/ops: the
// Prometheus alert rules (promtool check and unit tests), the Grafana
// dashboard, the runbook links, and that every metric they query is one the
// pin binary exports. It has no code of its own.
package opstest

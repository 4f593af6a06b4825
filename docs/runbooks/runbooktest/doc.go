// Package runbooktest runs the operators' runbooks: every fenced command
// and SQL block of docs/runbooks/*.md is executed against a database in the
// state its annotation names, with the pin binary built from this tree, and
// every log message a runbook quotes is looked up among the slog calls of
// the code. The conventions a runbook follows are in docs/runbooks/README.md.
package runbooktest

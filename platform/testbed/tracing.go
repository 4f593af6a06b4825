package testbed

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/postgres"
)

// Traced opens a second pool on d whose statements are traced into tp (the
// global provider, which Gorm uses, is not the test's); it is closed when
// tb ends, before the database is dropped.
func (d *Database) Traced(tb testing.TB, tp trace.TracerProvider) *gorm.DB {
	tb.Helper()
	gdb, err := postgres.OpenPool(context.Background(), d.URL, postgres.PoolConfig{TracerProvider: tp})
	if err != nil {
		tb.Fatalf("testbed: open %s traced: %v", d.Name, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	tb.Cleanup(func() { _ = sqlDB.Close() })
	return gdb
}

// DatabaseSpans are the client spans of database statements among spans
// (otelpgx's: they carry db.system.name).
func DatabaseSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindClient {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "db.system.name" {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// RequireNoValueInSpans fails when any attribute of spans holds one of
// values: statement parameters (ids, amounts, keys) must not reach a trace.
func RequireNoValueInSpans(tb testing.TB, spans []sdktrace.ReadOnlySpan, values ...string) {
	tb.Helper()
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			text := kv.Value.String()
			for _, v := range values {
				if strings.Contains(text, v) {
					tb.Fatalf("span %q has %s = %q, which holds the value %q", s.Name(), kv.Key, text, v)
				}
			}
		}
	}
}

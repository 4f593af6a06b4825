package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestStatementsUnderASpanAreTracedWithoutTheirValues: a statement run
// under a recording span gets a client span of its own, with its text but
// not its parameter values; a statement outside any span gets none.
func TestStatementsUnderASpanAreTracedWithoutTheirValues(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	gdb := db.Traced(t, tp)

	const secret, query = "card-4111-1111", `SELECT length($1::text)`
	var n int
	require.NoError(t, gdb.Raw(query, "untraced").Scan(&n).Error)
	require.Empty(t, testbed.DatabaseSpans(spans.Ended()), "no span without a recording parent")

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	require.NoError(t, gdb.WithContext(ctx).Raw(query, secret).Scan(&n).Error)
	require.NoError(t, gdb.WithContext(ctx).Exec(`SELECT set_config('application_name', ?, false)`, secret).Error)
	parent.End()
	require.Equal(t, len(secret), n)

	var queries []sdktrace.ReadOnlySpan // the prepare spans (a connection's first run, under the query) aside
	for _, s := range testbed.DatabaseSpans(spans.Ended()) {
		require.Equal(t, parent.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s is in the request's trace", s.Name())
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		if strings.HasPrefix(s.Name(), "query ") {
			require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the request", s.Name())
			queries = append(queries, s)
		}
	}
	require.Len(t, queries, 2)
	require.Equal(t, "query SELECT", queries[0].Name())
	require.Contains(t, attrs(queries[0]), "db.query.text="+query)
	testbed.RequireNoValueInSpans(t, spans.Ended(), secret)
}

func attrs(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, kv := range s.Attributes() {
		out = append(out, string(kv.Key)+"="+kv.Value.String())
	}
	return out
}

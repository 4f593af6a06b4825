// Package correlation carries the id of the work in progress (an HTTP
// request's, or a background run's such as one expiry cycle) through the
// context. It depends on nothing, so a use case can set a run id without
// importing the logging, metrics or tracing libraries.
package correlation

import "context"

type ctxKey int

const (
	requestIDKey ctxKey = iota
	runIDKey
)

// WithRequestID returns a context carrying the HTTP request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// WithRunID returns a context carrying the id of a background run.
func WithRunID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runIDKey, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// RunID returns the run id in ctx, or "".
func RunID(ctx context.Context) string {
	id, _ := ctx.Value(runIDKey).(string)
	return id
}

// ID is the id that ties an event to the operation that caused it: the run
// id of a background run, else the HTTP request id.
func ID(ctx context.Context) string {
	if id := RunID(ctx); id != "" {
		return id
	}
	return RequestID(ctx)
}

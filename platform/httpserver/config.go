package httpserver

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Defaults applied to the zero fields of a Config.
const (
	DefaultAddr              = "127.0.0.1:8080"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultBodyLimit         = "64KiB"
	DefaultHandlerTimeout    = 10 * time.Second
	DefaultRetryAfter        = 5 * time.Second
	DefaultMaxHeaderBytes    = 16 << 10
)

// Config sets up the HTTP server. Zero fields take the defaults above.
type Config struct {
	// Addr is the host:port to listen on (Serve only).
	Addr string
	// ReadTimeout bounds reading a whole request, body included; it is what
	// stops a slow client from holding a connection with a trickled body.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading the request headers (slowloris).
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to the
	// end of the response, so it caps a handler's run time as seen by clients.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for the next
	// request.
	IdleTimeout time.Duration
	// BodyLimit caps request bodies: a number of bytes with an optional
	// binary suffix K/KiB or M/MiB ("64K" and "64KiB" are both 65536 bytes,
	// unlike echo's BodyLimit, for which "64K" means 64000).
	BodyLimit string
	// HandlerTimeout is the deadline of every request's context: database
	// work (waiting for a pooled connection included) still running then is
	// cancelled and the client gets 503 with Retry-After. It is a backstop
	// for the database's own statement and lock timeouts, which end first.
	HandlerTimeout time.Duration
	// Transient recognises errors of a dependency that cannot serve the
	// request now (postgres.IsTransient); they are answered 503 with
	// Retry-After and logged at most once per interval. Nil: none.
	Transient func(error) bool
	// ReadOnly recognises a write the database refused because it is
	// read-only (postgres.IsReadOnly); it is answered 503
	// database-read-only with Retry-After and not logged here: the pool
	// logs the episode once (ADR 0021). Nil: none.
	ReadOnly func(error) bool
	// AdmitWrite, when set, is asked before a write (a request other than
	// GET, HEAD, OPTIONS or TRACE to a route) is handled; its error is
	// answered at once, as the handler's would be. It holds writes back
	// while the database refuses them (postgres.ReadOnlyWatch.AdmitWrite,
	// ADR 0031), so an outage is answered without a round trip.
	AdmitWrite func() error
	// RetryAfter is the Retry-After of a 503.
	RetryAfter time.Duration
	// MaxHeaderBytes caps the request line and headers (net/http's default
	// is 1 MiB); a request over it gets 431 before any handler runs.
	MaxHeaderBytes int
	// Propagator reads the trace context of incoming requests; nil means W3C
	// trace context and baggage. `pin serve` passes the one OTEL_PROPAGATORS
	// names (observability.NewTracerProvider installs it globally).
	Propagator propagation.TextMapPropagator
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.BodyLimit = cmp.Or(c.BodyLimit, DefaultBodyLimit)
	c.HandlerTimeout = cmp.Or(c.HandlerTimeout, DefaultHandlerTimeout)
	c.RetryAfter = cmp.Or(c.RetryAfter, DefaultRetryAfter)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	return c
}

// Validate reports a configuration that New or Serve would reject. Zero
// fields are valid: they take the defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for name, d := range map[string]time.Duration{
		"ReadTimeout": c.ReadTimeout, "ReadHeaderTimeout": c.ReadHeaderTimeout,
		"WriteTimeout": c.WriteTimeout, "IdleTimeout": c.IdleTimeout,
		"HandlerTimeout": c.HandlerTimeout, "RetryAfter": c.RetryAfter,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("httpserver: %s %s is negative", name, d))
		}
	}
	if c.MaxHeaderBytes < 0 {
		errs = append(errs, fmt.Errorf("httpserver: MaxHeaderBytes %d is negative", c.MaxHeaderBytes))
	}
	if _, err := ParseByteSize(c.BodyLimit); err != nil {
		errs = append(errs, fmt.Errorf("httpserver: BodyLimit: %w", err))
	}
	return errors.Join(errs...)
}

// ParseByteSize parses a size such as "65536", "64K", "64KiB", "1M" or
// "1MiB". K and M are binary (1024, 1024²): decimal "KB"/"MB" are rejected
// because they are read both ways in the wild.
func ParseByteSize(s string) (int64, error) {
	trimmed := strings.TrimSpace(s)
	multiplier := int64(1)
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(trimmed, u.suffix); ok {
			trimmed, multiplier = rest, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(trimmed, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/multiplier {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with K, KiB, M or MiB", s)
	}
	return n * multiplier, nil
}

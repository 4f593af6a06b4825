// Package host runs the modular monolith: the HTTP server, the modules'
// background runners and the platform's own runners (the outbox relay),
// and stops them gracefully on SIGTERM/SIGINT.
package host

import (
	"context"

	"github.com/labstack/echo/v5"
)

// Runner is a long-running background activity. Run blocks until ctx is
// cancelled (return nil then) or the runner fails (return the error). The
// host restarts a runner that returns an error or panics, with backoff.
//
// A runner that works in cycles must finish the cycle in flight when ctx is
// cancelled: commit or roll back whole, never half.
type Runner interface {
	Name() string
	Run(ctx context.Context) error
}

// Module is what a business module hands to the host.
type Module interface {
	// Name is a short, stable identifier used in logs and metrics.
	Name() string
	// RegisterRoutes adds the module's HTTP routes to g, under g's prefix:
	// this host passes e.Group(""), another host may pass a prefix group.
	RegisterRoutes(g *echo.Group)
	// Runners lists the module's background runners.
	Runners() []Runner
}

// EventSource is a Module that publishes integration events through the
// transactional outbox (platform/outbox). The host relays, cleans and
// measures every topic a module declares; `pin migrate up` and `pin dev`
// make each declared topic's outbox table (outbox.EnsureTopics), and a
// module's tests get them from testbed.DeclareTopics.
type EventSource interface {
	// OutboxTopics are the Kafka topics the module writes to the outbox.
	OutboxTopics() []string
}

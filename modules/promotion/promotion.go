// Package promotion is the promotion module of the Pin monolith: companies
// buy promotion packages for their projects, property objects and posts;
// purchases run for a fixed period and every status change is announced by
// the pin.promotion.purchase-changed event (package contract).
//
// The host sees only this package: New builds the module from its Deps, and
// the module hands back its HTTP routes, background runners and outbox
// topics; the operators' commands call its entry points (ExpireOnce,
// Snapshot, ListPoison, ReleasePoison, ReadExpiryStatus). Everything else is
// internal.
package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/outbox"
)

// Deps is what the host gives the module.
type Deps struct {
	// DB is the service's database (required).
	DB *gorm.DB
	// APIDB serves the HTTP API; DB when nil. `pin serve` gives the API a
	// pool of its own whose sessions have statement and lock timeouts
	// (postgres.APIPool), so that requests and runners do not starve each
	// other and no request waits on the database unbounded.
	APIDB *gorm.DB
	// Outbox writes events inside the module's transactions (required).
	Outbox *outbox.Publisher
	// Authenticate runs before every route (required to serve HTTP): it puts
	// the caller's auth.Principal into the request context
	// (auth.WithPrincipal) or returns an error, an apperror of
	// KindUnauthenticated for a 401. `pin serve` gives
	// auth.Authenticator.Middleware; another host gives its own.
	Authenticate echo.MiddlewareFunc
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
	// Registerer receives the module's metrics; nil registers none.
	Registerer prometheus.Registerer
	// TracerProvider is a no-op provider when nil.
	TracerProvider trace.TracerProvider
	// Now is the clock; time.Now when nil. Tests move it.
	Now func() time.Time
	// Expire configures the expiry cycle and its runner.
	Expire ExpireSettings
}

// ExpireSettings are the expiry cycle's settings (PIN_EXPIRE_* variables,
// ExpireSettingsOf); zero Interval, BatchSize, CycleBudget and StopTimeout
// take platform/config's defaults.
type ExpireSettings = expiry.ExpireSettings

// ExpireIdleInTransaction is the expiry batch's idle bound. The host sets it
// on the runners' pool as well (cmd/pin's module list): a batch aborted by an error loses
// its SET LOCAL timeouts, and a frozen job would hold its session for ever
// (docs/adr/0014-expiry-batch-bounded-in-time.md, decision 7).
var ExpireIdleInTransaction = adapters.DefaultExpireTimeouts.IdleInTransaction

// Name is the module's stable name in logs and metrics.
const Name = "promotion"

// Module is the promotion module, ready to be registered with the host.
type Module struct {
	deps    Deps
	events  adapters.Publications // the topics of the purchase-changed event
	app     app.Application
	http    *ports.HTTPServer
	runners []host.Runner
	expire  *expiryJob // the expiry cycle and its runner (expire.go)
}

var (
	_ host.Module      = (*Module)(nil)
	_ host.EventSource = (*Module)(nil)
)

// publications are the topics the purchase-changed event is published to,
// each transition to all of them in its transaction. A second entry is how
// a new contract version is published beside the old one during its
// migration (docs/contracts/purchase-changed.md, "A breaking change: version 2").
func publications() adapters.Publications {
	return adapters.Publications{adapters.PurchaseChangedV1()}
}

// New builds the module from its dependencies.
func New(d Deps) (*Module, error) {
	return newModule(d, publications())
}

// newModule builds the module publishing its event to events.
func newModule(d Deps, events adapters.Publications) (*Module, error) {
	// Authenticate is needed only to serve HTTP: `pin expire-promotions --once`
	// builds the module without it.
	if d.DB == nil || d.Outbox == nil {
		return nil, errors.New("promotion: DB and Outbox are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	d.Logger = d.Logger.With("module", Name)
	if d.TracerProvider == nil {
		d.TracerProvider = noop.NewTracerProvider()
	}
	if d.Now == nil {
		d.Now = time.Now
	}

	if d.APIDB == nil {
		d.APIDB = d.DB
	}
	purchases, err := adapters.NewPurchaseRepository(d.APIDB, d.Outbox, events...)
	if err != nil {
		return nil, fmt.Errorf("promotion: %w", err)
	}
	packages, err := adapters.NewPackageRepository(d.APIDB)
	if err != nil {
		return nil, fmt.Errorf("promotion: %w", err)
	}
	application, err := app.New(app.Config{Purchases: purchases, Packages: packages, Now: d.Now})
	if err != nil {
		return nil, fmt.Errorf("promotion: %w", err)
	}
	m := &Module{
		deps:   d,
		events: events,
		app:    application,
		http:   ports.NewHTTPServer(application, d.Authenticate),
	}
	expire, err := newExpiry(d, events)
	if err != nil {
		return nil, fmt.Errorf("promotion: %w", err)
	}
	m.expire = expire
	m.runners = append(m.runners, expire.runner)
	background, err := adapters.NewPurchaseRepository(d.DB, d.Outbox, events...)
	if err != nil {
		return nil, fmt.Errorf("promotion: %w", err)
	}
	m.runners = append(m.runners, ports.NewIdempotencyKeyCleaner(
		app.NewForgetIdempotencyKeysHandler(background, d.Now), ports.IdempotencyKeyCleanerInterval, d.Logger))
	return m, nil
}

// Name returns "promotion".
func (m *Module) Name() string { return Name }

// RegisterRoutes adds the module's HTTP API (docs/api/openapi.yaml) to g,
// under g's prefix. The routes render their own errors as problem documents
// on a host not built by httpserver.New (ADR-0003, "Embedding a module").
func (m *Module) RegisterRoutes(g *echo.Group) {
	if m.deps.Authenticate == nil {
		panic("promotion: RegisterRoutes needs Deps.Authenticate")
	}
	m.http.RegisterRoutes(g)
}

// OutboxTopics implements host.EventSource: the topics of the module's
// publications, contract.Topic alone. Their outbox tables are made from
// this declaration (outbox.EnsureTopics, by `pin migrate up` and `pin dev`),
// not by the module's migrations.
func (m *Module) OutboxTopics() []string { return m.events.Topics() }

// Topics are the Kafka topics the module publishes to, as a Module's
// OutboxTopics declares them, known without building a module: cmd/pin's
// module list and the module's tests (testbed.DeclareTopics) read them.
func Topics() []string { return publications().Topics() }

// Runners returns the module's background runners.
func (m *Module) Runners() []host.Runner { return append([]host.Runner(nil), m.runners...) }

// SeedDemoPackages stores the demo packages project-boost-week,
// property-object-boost-week and post-boost-week unless their codes exist,
// for `pin dev`. It is idempotent and never overwrites an admin's edits.
func (m *Module) SeedDemoPackages(ctx context.Context) error {
	return m.app.SeedDemoPackages.Handle(ctx)
}

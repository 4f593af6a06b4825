// Package boost is the reference consumer of the pin.promotion.purchase-changed
// event: a projection of the promotion boost per target (the sum of
// boostWeight over the target's Active purchases), as the catalog's and the
// news' PromotionBoostConsumer keep it. It answers
// GET /api/developers/v1/promotion-boosts/{targetKind}/{targetId}.
//
// It reaches the promotion module only through its contract package, and
// consumes with the platform's kit (platform/consumer): inbox, version guard,
// dead letters. docs/consuming-the-event.md walks through it for the teams
// that copy it.
package boost

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
)

// Name is the module's name in logs, and the consumer's name: its Kafka
// consumer group and the key of its rows in the consumer schema.
const Name = "boost"

// PathBoost is the route of a target's boost.
const PathBoost = "/api/developers/v1/promotion-boosts/:targetKind/:targetId"

// Deps is what the host gives the module.
type Deps struct {
	// DB is the service's database (required); the consumer writes through it.
	DB *gorm.DB
	// APIDB serves the route, with the API pool's timeouts; DB when nil.
	APIDB *gorm.DB
	// Authenticate runs before the route (required): it puts the caller's
	// auth.Principal into the request context or returns an error, as
	// promotion.Deps.Authenticate.
	Authenticate echo.MiddlewareFunc
	// Brokers are the Kafka bootstrap brokers (required).
	Brokers []string
	// Sarama is the Kafka client configuration, with the service's security
	// settings; nil means kafka.ConsumerConfig.
	Sarama *sarama.Config
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
	// Registerer receives the consumer's metrics (required).
	Registerer prometheus.Registerer
	// Now is the clock of the delay metric; time.Now when nil.
	Now func() time.Time
	// TracerProvider receives the consumer's batch spans; the global
	// provider when nil.
	TracerProvider trace.TracerProvider
}

// Module is the boost projection, ready to be registered with the host.
type Module struct {
	db           *gorm.DB // the route's pool
	authenticate echo.MiddlewareFunc
	runners      []host.Runner
}

var _ host.Module = (*Module)(nil)

// New builds the module: the consumer runner of the projection and the
// retention of its inbox.
func New(d Deps) (*Module, error) {
	if d.DB == nil || d.Authenticate == nil || d.Registerer == nil || len(d.Brokers) == 0 {
		return nil, errors.New("boost: DB, Authenticate, Registerer and Brokers are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	logger := d.Logger.With("module", Name)
	runner, err := consumer.NewRunner(d.DB, consumer.Config{
		Name:           Name,
		Topic:          contract.Topic,
		Brokers:        d.Brokers,
		Sarama:         d.Sarama,
		Now:            d.Now,
		TracerProvider: d.TracerProvider,
	}, Projection{Logger: logger}, logger, d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("boost: %w", err)
	}
	cleaner, err := consumer.NewInboxCleaner(d.DB, Name, consumer.DefaultInboxRetention, logger)
	if err != nil {
		return nil, fmt.Errorf("boost: %w", err)
	}
	if d.APIDB == nil {
		d.APIDB = d.DB
	}
	return &Module{db: d.APIDB, authenticate: d.Authenticate, runners: []host.Runner{runner, cleaner}}, nil
}

// Name returns "boost".
func (m *Module) Name() string { return Name }

// RegisterRoutes adds the boost route to g, under g's prefix: tenants and
// admins may read it. Its errors are problem documents on any host.
func (m *Module) RegisterRoutes(g *echo.Group) {
	g.GET(PathBoost, m.getBoost, httpserver.RenderProblems(), m.authenticate, auth.RequireTenantOrAdmin())
}

// Runners returns the consumer and its inbox retention.
func (m *Module) Runners() []host.Runner { return append([]host.Runner(nil), m.runners...) }

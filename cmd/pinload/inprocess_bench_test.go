package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// BenchmarkAPIInProcess is BenchmarkAPI's load against the server wired
// in this process the way `pin serve` wires it (JSON logs at info, going to
// io.Discard; Prometheus registry; a recording tracer provider; the outbox
// relay running against kfake), so that -cpuprofile and -memprofile
// see the server's side. Client and server share the process (and the two
// cores), so its throughput is not the figure to quote: BenchmarkAPI's is.
func BenchmarkAPIInProcess(b *testing.B) {
	for range b.N {
		ctx := context.Background()
		db := testbed.NewDatabase(b)
		brokers := testbed.NewKafka(b, contract.Topic)
		baseURL, authn := serveInProcess(b, db.URL, brokers)
		admin, err := authn.Issue(auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}, time.Hour)
		require.NoError(b, err)
		tenant, err := authn.Issue(auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}, time.Hour)
		require.NoError(b, err)
		pkg, err := createPackage(ctx, baseURL, admin)
		require.NoError(b, err)
		res, err := runLoad(ctx, loadConfig{
			BaseURL: baseURL, TenantToken: tenant, PackageID: pkg,
			Clients: apiClients, Duration: 10 * time.Second, Warmup: time.Second,
		})
		require.NoError(b, err)
		b.Logf("in process: %s", res.summary())
		b.ReportMetric(res.PerSecond(), "purchases/s")
		b.ReportMetric(ms(res.Percentile(99)), "p99-ms")
	}
}

// serveInProcess serves the promotion API as cmd/pin's serve does, until
// tb ends, and returns its base URL and token issuer.
func serveInProcess(tb testing.TB, databaseURL string, brokers []string) (string, *auth.Authenticator) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := observability.NewLogger(io.Discard, slog.LevelInfo)
	reg := observability.NewRegistry()
	tp := sdktrace.NewTracerProvider()
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	gdb, err := postgres.Open(ctx, databaseURL)
	require.NoError(tb, err)
	sqlDB, err := gdb.DB()
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = sqlDB.Close() })
	authn, err := auth.NewAuthenticator([]byte(uuid.NewString()))
	require.NoError(tb, err)
	publisher, err := outbox.NewPublisher(tp)
	require.NoError(tb, err)
	module, err := promotion.New(promotion.Deps{
		DB: gdb, Outbox: publisher, Authenticate: authn.Middleware(), Logger: logger, Registerer: reg, TracerProvider: tp,
	})
	require.NoError(tb, err)
	outboxRelay, err := relay.New(sqlDB, relay.Config{Brokers: brokers, Topics: module.OutboxTopics(),
		PollInterval: config.Defaults().OutboxPollInterval}, logger, reg, tp)
	require.NoError(tb, err)

	cfg := httpserver.DefaultConfig()
	e := httpserver.New(cfg, logger, reg, tp)
	module.RegisterRoutes(e.Group(""))
	e.GET("/readyz", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	done := make(chan error, 2)
	go func() { done <- httpserver.ServeListener(ctx, ln, e, cfg, 5*time.Second) }()
	go func() { done <- outboxRelay.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("in-process server: %v", err)
			}
		}
	})
	return "http://" + ln.Addr().String(), authn
}

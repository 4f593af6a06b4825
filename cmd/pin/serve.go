package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"

	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/buildinfo"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// serve runs `pin serve`: the run path, open → build → run, with nothing
// between its steps. `pin dev` (dev.go) takes the same path and adds its
// development step between them.
func serve(ctx context.Context, environ []string, stderr io.Writer) error {
	cfg, err := config.Load(environ, config.NeedKafka|config.NeedJWTSecret)
	if err != nil {
		return err
	}
	s, err := openServer(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.build(ctx); err != nil {
		return err
	}
	return s.run(ctx)
}

// server is the host that `pin serve` and `pin dev` run, filled in by the
// steps of the run path.
type server struct {
	*platform
	// sqlDB is the runners' pool, p.db's.
	sqlDB *sql.DB
	// dev is only said in the start line.
	dev  bool
	ln   net.Listener
	host *host.Host
	// built are the modules on the host, by name.
	built map[string]host.Module
	authn *auth.Authenticator
}

// openServer opens the platform and both pools: the runners' and the API's.
func openServer(ctx context.Context, cfg config.Config, stderr io.Writer) (*server, error) {
	// The runners' pool (expiry, consumer, cleaners) is "serve"; the API's
	// and the relay's lock sessions are named apart.
	p, err := newPlatform(ctx, cfg, "serve", stderr)
	if err != nil {
		return nil, err
	}
	s := &server{platform: p}
	if err := s.openAPIPool(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *server) openAPIPool(ctx context.Context) error {
	var err error
	if s.sqlDB, err = s.db.DB(); err != nil {
		return err
	}
	// The runners keep what the API pool leaves of the usual 20 connections.
	s.sqlDB.SetMaxOpenConns(postgres.BackgroundMaxOpenConns)
	api := postgres.APIPool
	api.ApplicationName = postgres.ApplicationName("api")
	api.ReadOnly = s.readOnly
	if s.apiDB, err = postgres.OpenPool(ctx, s.cfg.DatabaseURL, api); err != nil {
		return err
	}
	apiSQL, err := s.apiDB.DB()
	if err != nil {
		return err
	}
	s.reg.MustRegister(collectors.NewDBStatsCollector(apiSQL, "pin_api"))
	return nil
}

func (s *server) close() {
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.platform.close()
}

// build binds the HTTP port and puts the modules and runners on the host.
func (s *server) build(ctx context.Context) error {
	cfg := s.cfg
	authn, err := auth.NewAuthenticator([]byte(cfg.JWTSecret), cfg.AuthOptions()...)
	if err != nil {
		return &config.Error{Var: "PIN_AUTH_JWT_SECRET", Rule: err.Error()}
	}
	s.authn = authn
	// Bound before anything is announced: a taken port fails here, naming
	// the variable, not after the dev banner has told users to curl it.
	if s.ln, err = new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen on %s (PIN_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	httpCfg := httpserver.Config{Addr: cfg.HTTPAddr, Transient: postgres.IsTransient, ReadOnly: postgres.IsReadOnly,
		AdmitWrite: s.readOnly.AdmitWrite, Propagator: otel.GetTextMapPropagator()}
	e := httpserver.New(httpCfg, s.logger, s.reg, s.tp)
	ln := s.ln
	s.host, err = host.New(host.Config{ShutdownTimeout: cfg.ShutdownTimeout, DrainDelay: cfg.ShutdownDrain}, e, func(ctx context.Context) error {
		return httpserver.ServeListener(ctx, ln, e, httpCfg, cfg.ShutdownTimeout)
	}, s.logger, s.reg)
	if err != nil {
		return err
	}
	var publicMetrics *prometheus.Registry // nil: /metrics on the admin listener only
	if cfg.MetricsPublic {
		publicMetrics = s.reg
	}
	ready := s.host.ReadyUnlessDraining(func(ctx context.Context) error { return postgres.Ready(ctx, s.sqlDB) })
	host.RegisterProbes(e, ready, publicMetrics, s.logger)
	if err := addAdmin(ctx, s.host, cfg.AdminAddr, s.reg, s.logger); err != nil {
		return err
	}

	publisher, err := outbox.NewPublisher(s.tp)
	if err != nil {
		return err
	}
	if err := s.addModules(hostDeps{outbox: publisher, authenticate: authn.Middleware()}); err != nil {
		return err
	}
	if err := s.addOutboxRunners(); err != nil {
		return err
	}
	topicCheck, err := kafka.NewTopicCheck(cfg.KafkaBrokers, kafkaSecurity(cfg), moduleTopics(s.host.OutboxTopics()), cfg.KafkaTopicCheckInterval, s.logger, s.reg)
	if err != nil {
		return err
	}
	s.host.AddRunner(topicCheck)
	return nil
}

// run runs the host until ctx ends; a stop by signal is no failure.
func (s *server) run(ctx context.Context) error {
	s.logger.InfoContext(ctx, "pin started", "version", version(), "go_version", buildinfo.Read().GoVersion, "http_addr", s.cfg.HTTPAddr, "dev", s.dev, "kafka_brokers", s.cfg.KafkaBrokers, "kafka_security", kafkaSecurity(s.cfg))
	if err := s.host.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

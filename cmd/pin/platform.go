package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/buildinfo"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/postgres"
)

// platform is what every command that talks to the database shares.
type platform struct {
	cfg    config.Config
	logger *slog.Logger
	reg    *prometheus.Registry
	tp     observability.TracerProvider
	db     *gorm.DB
	// apiDB is the HTTP API's pool (postgres.APIPool); nil outside serve.
	apiDB *gorm.DB
	// readOnly watches both pools for a database refusing writes.
	readOnly *postgres.ReadOnlyWatch
}

// newPlatform opens the platform; role names its pool's sessions
// (postgres.ApplicationName). The pool runs the modules' runners, so its
// sessions carry the idle bound a module asks for (the expiry batch's, even
// after an abort: ADR 0014, decision 7); the relay's lock sessions set
// their own.
func newPlatform(ctx context.Context, cfg config.Config, role string, stderr io.Writer) (*platform, error) {
	level, err := observability.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	logger := observability.NewLogger(stderr, level)
	slog.SetDefault(logger)
	observability.LogOTelErrors(logger)
	build := buildinfo.Read()
	build.WarnIfToolchainOutdated(ctx, logger)
	tp, err := observability.NewTracerProvider(ctx, build.Version)
	if err != nil {
		return nil, err
	}
	reg := observability.NewRegistry()
	readOnly := postgres.NewReadOnlyWatch(logger, reg)
	db, err := postgres.OpenPool(ctx, cfg.DatabaseURL, postgres.PoolConfig{
		ApplicationName:          postgres.ApplicationName(role),
		IdleInTransactionTimeout: runnersIdleInTransaction(),
		ReadOnly:                 readOnly,
	})
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	// The pool's waits are the first sign that its users (the runners, and
	// the API outside serve) starve each other.
	reg.MustRegister(collectors.NewDBStatsCollector(sqlDB, "pin"), build.Collector())
	return &platform{cfg: cfg, logger: logger, reg: reg, tp: tp, db: db, readOnly: readOnly}, nil
}

func (p *platform) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.tp.Shutdown(ctx); err != nil {
		p.logger.WarnContext(ctx, "tracer provider shutdown", "error", err)
	}
	for _, db := range []*gorm.DB{p.db, p.apiDB} {
		if db == nil {
			continue
		}
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
}

// runnersIdleInTransaction is the shortest idle bound a module asks of the
// runners' pool; zero when none does.
func runnersIdleInTransaction() time.Duration {
	var d time.Duration
	for _, m := range modules() {
		if m.idleInTransaction > 0 && (d == 0 || m.idleInTransaction < d) {
			d = m.idleInTransaction
		}
	}
	return d
}

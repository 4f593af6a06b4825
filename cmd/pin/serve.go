package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// platform is what every command that talks to the database shares.
type platform struct {
	cfg    config.Config
	logger *slog.Logger
	reg    *prometheus.Registry
	tp     *sdktrace.TracerProvider
	db     *gorm.DB
	// apiDB is the HTTP API's pool (postgres.APIPool); nil outside serve.
	apiDB *gorm.DB
}

func newPlatform(ctx context.Context, cfg config.Config, stderr io.Writer) (*platform, error) {
	level, err := observability.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	logger := observability.NewLogger(stderr, level)
	slog.SetDefault(logger)
	tp, err := observability.NewTracerProvider(ctx, version())
	if err != nil {
		return nil, err
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	reg := observability.NewRegistry()
	// The pool's waits are the first sign that its users (the runners, and
	// the API outside serve) starve each other.
	reg.MustRegister(collectors.NewDBStatsCollector(sqlDB, "pin"))
	return &platform{cfg: cfg, logger: logger, reg: reg, tp: tp, db: db}, nil
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

// promotionModule builds the promotion module; authenticate is nil for a
// process that serves no HTTP.
func (p *platform) promotionModule(authenticate echo.MiddlewareFunc, publisher *outbox.Publisher) (*promotion.Module, error) {
	return promotion.New(promotion.Deps{
		DB:             p.db,
		APIDB:          p.apiDB,
		Outbox:         publisher,
		Authenticate:   authenticate,
		Logger:         p.logger,
		Registerer:     p.reg,
		TracerProvider: p.tp,
		Now:            time.Now,
		Expire: promotion.ExpireSettings{
			Interval:           p.cfg.ExpireInterval,
			BatchSize:          p.cfg.ExpireBatchSize,
			MaxBatchesPerCycle: p.cfg.ExpireMaxBatchesPerCycle,
			CycleBudget:        p.cfg.ExpireCycleBudget,
		},
	})
}

// serve runs `pin serve`, or `pin dev` when dev is set: the same host, with
// the database created and migrated, an embedded broker when no
// PIN_KAFKA_BROKERS is given, a generated JWT secret, demo packages and a
// printed how-to.
func serve(ctx context.Context, environ []string, stdout, stderr io.Writer, dev bool) error {
	needs := config.NeedKafka | config.NeedJWTSecret
	if dev {
		needs = 0
	}
	cfg, err := config.Load(environ, needs)
	if err != nil {
		return err
	}
	if dev && len(cfg.KafkaBrokers) == 0 && (cfg.KafkaSASLMechanism != "" || cfg.KafkaTLS) {
		return &config.Error{Var: "PIN_KAFKA_BROKERS", Rule: "is required when Kafka security is set: the embedded broker of pin dev is plaintext"}
	}
	if dev {
		if err := postgres.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		if cfg.JWTSecret == "" {
			cfg.JWTSecret = randomSecret()
		}
	}

	p, err := newPlatform(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer p.close()
	sqlDB, err := p.db.DB()
	if err != nil {
		return err
	}
	// The runners keep what the API pool leaves of the usual 20 connections.
	sqlDB.SetMaxOpenConns(postgres.BackgroundMaxOpenConns)
	if p.apiDB, err = postgres.OpenPool(ctx, cfg.DatabaseURL, postgres.APIPool); err != nil {
		return err
	}
	apiSQL, err := p.apiDB.DB()
	if err != nil {
		return err
	}
	p.reg.MustRegister(collectors.NewDBStatsCollector(apiSQL, "pin_api"))
	if dev {
		if err := postgres.Migrate(ctx, sqlDB); err != nil {
			return err
		}
		if err := markDevDatabase(ctx, sqlDB); err != nil {
			return err
		}
		if len(cfg.KafkaBrokers) == 0 {
			stopBroker, err := startDevBroker(cfg.DevKafkaAddr, promotion.Topics()...)
			if err != nil {
				return fmt.Errorf("dev: embedded Kafka-protocol broker on %s (PIN_DEV_KAFKA_ADDR): %w", cfg.DevKafkaAddr, err)
			}
			defer stopBroker()
			cfg.KafkaBrokers = []string{cfg.DevKafkaAddr}
			p.logger.InfoContext(ctx, "embedded Kafka-protocol broker started", "addr", cfg.DevKafkaAddr, "topics", promotion.Topics())
		}
	}

	authn, err := auth.NewAuthenticator([]byte(cfg.JWTSecret), cfg.AuthOptions()...)
	if err != nil {
		return &config.Error{Var: "PIN_AUTH_JWT_SECRET", Rule: err.Error()}
	}
	// Bound before anything is announced: a taken port fails here, naming
	// the variable, not after the dev banner has told users to curl it.
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (PIN_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	defer ln.Close()
	httpCfg := httpserver.Config{Addr: cfg.HTTPAddr, Transient: postgres.IsTransient}
	e := httpserver.New(httpCfg, p.logger, p.reg, p.tp)
	h, err := host.New(host.Config{ShutdownTimeout: cfg.ShutdownTimeout}, e, func(ctx context.Context) error {
		return httpserver.ServeListener(ctx, ln, e, httpCfg, cfg.ShutdownTimeout)
	}, p.logger, p.reg)
	if err != nil {
		return err
	}
	host.RegisterProbes(e, func(ctx context.Context) error { return postgres.Ready(ctx, sqlDB) }, p.reg, p.logger)
	if err := addAdmin(ctx, h, cfg.AdminAddr, p.logger); err != nil {
		return err
	}

	publisher, err := outbox.NewPublisher(p.logger, p.tp)
	if err != nil {
		return err
	}
	module, err := p.promotionModule(authn.Middleware(), publisher)
	if err != nil {
		return err
	}
	h.AddModule(module)

	sec := kafkaSecurity(cfg)
	if err := addOutboxRunners(h, sqlDB, cfg, sec, p); err != nil {
		return err
	}
	topicCheck, err := kafka.NewTopicCheck(cfg.KafkaBrokers, sec, moduleTopics(h.OutboxTopics()), cfg.KafkaTopicCheckInterval, p.logger, p.reg)
	if err != nil {
		return err
	}
	h.AddRunner(topicCheck)

	if dev || cfg.BoostProjection == "on" {
		projection, err := boost.New(boost.Deps{
			DB:           p.db,
			APIDB:        p.apiDB,
			Authenticate: authn.Middleware(),
			Brokers:      cfg.KafkaBrokers,
			Sarama:       kafka.NewConsumerConfig("pin-"+boost.Name, sec),
			Logger:       p.logger,
			Registerer:   p.reg,
		})
		if err != nil {
			return err
		}
		h.AddModule(projection)
	}

	if dev {
		if err := module.SeedDemoPackages(ctx); err != nil {
			return err
		}
		if err := printDevHowTo(stdout, cfg, authn); err != nil {
			return err
		}
	}
	p.logger.InfoContext(ctx, "pin started", "version", version(), "http_addr", cfg.HTTPAddr, "dev", dev, "kafka_brokers", cfg.KafkaBrokers, "kafka_security", sec)
	if err := h.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// addOutboxRunners adds the outbox relay and retention of the topics the
// modules declared; the relay also exports the outbox metrics.
func addOutboxRunners(h *host.Host, sqlDB *sql.DB, cfg config.Config, sec kafka.Security, p *platform) error {
	topics := h.OutboxTopics()
	if len(topics) == 0 {
		return nil
	}
	relay, err := outbox.NewRelay(sqlDB, outbox.RelayConfig{
		Brokers:      cfg.KafkaBrokers,
		Topics:       topics,
		PollInterval: cfg.OutboxPollInterval,
		Sarama:       kafka.NewProducerConfig("pin-outbox-relay", sec),
	}, p.logger, p.reg, p.tp)
	if err != nil {
		return err
	}
	h.AddRunner(relay)
	cleaner, err := outbox.NewRetentionCleaner(sqlDB, outbox.RetentionConfig{
		Topics:    topics,
		Retention: cfg.OutboxRetention,
	}, p.logger)
	if err != nil {
		return err
	}
	h.AddRunner(cleaner)
	return nil
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func printDevHowTo(w io.Writer, cfg config.Config, authn *auth.Authenticator) error {
	tenant := auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}
	admin := auth.Principal{UserID: uuid.New(), TenantID: uuid.New(), Roles: []string{auth.RoleAdmin}}
	tenantToken, err := authn.Issue(tenant, 24*time.Hour)
	if err != nil {
		return err
	}
	adminToken, err := authn.Issue(admin, 24*time.Hour)
	if err != nil {
		return err
	}
	pin, err := os.Executable()
	if err != nil {
		pin = "pin"
	}
	// The exports are what a second shell needs for the README's walk and
	// for pin expire-promotions, pin migrate status, pin token and pin dev
	// make-due; the secret, and so the tokens, die with this process.
	fmt.Fprintf(w, `
pin dev is running (development only).

  API        %[1]s
  Kafka      %[2]s   topic %[3]s

In another shell (unless PIN_AUTH_JWT_SECRET was set, the secret is made for this run: the tokens die with it):
  export PIN_DATABASE_URL=%[4]s
  export PIN_AUTH_JWT_SECRET=%[5]s
  export BASE=%[1]s KAFKA=%[2]s PIN=%[8]s
  export TOKEN=%[6]s
  export ADMIN_TOKEN=%[7]s

Then follow "A first purchase, step by step" in README.md: a purchase, its boost, its expiry
($PIN dev make-due $PURCHASE_ID, then $PIN expire-promotions --once) and its events:
  kcat -C -b $KAFKA -t %[3]s -o beginning -e -f 'key=%%k partition=%%p headers=%%h\n%%s\n\n'

`, "http://"+cfg.HTTPAddr, cfg.KafkaBrokers[0], contract.Topic, shellQuote(cfg.DatabaseURL), cfg.JWTSecret, tenantToken, adminToken, shellQuote(pin))
	return nil
}

// shellQuote makes s one word for a POSIX shell (a database URL has & and ?).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dev runs `pin dev`, or its development tool `pin dev make-due`.
func dev(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "make-due" {
		return makeDue(ctx, args[1:], environ, stdout)
	}
	if err := noArgs("dev", "dev", args, stdout); err != nil {
		return err
	}
	return serve(ctx, environ, stdout, stderr, true)
}

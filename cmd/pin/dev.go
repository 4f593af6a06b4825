//go:build !production

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// dev runs `pin dev`, or its development tool `pin dev make-due`. The
// container image is built with -tags production, without this file.
func dev(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "make-due" {
		return makeDue(ctx, args[1:], environ, stdout, stderr)
	}
	if err := cli.NoArgsWithEnvironment("dev", "dev", environmentHelp["dev"], args, stdout); err != nil {
		return err
	}
	return devServe(ctx, environ, stdout, stderr)
}

// devServe takes serve's run path (open → build → run) with the
// development step around it: the database created, a secret made, the
// migrations applied, the database marked, an embedded broker started when
// PIN_KAFKA_BROKERS is unset, the boost projection always on, demo packages
// seeded and a how-to printed once the port is bound.
func devServe(ctx context.Context, environ []string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return err
	}
	if len(cfg.KafkaBrokers) == 0 && (cfg.KafkaSASLMechanism != "" || cfg.KafkaTLS) {
		return &config.Error{Var: "PIN_KAFKA_BROKERS", Rule: "is required when Kafka security is set: the embedded broker of pin dev is plaintext"}
	}
	if err := postgres.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = randomSecret()
	}
	cfg.BoostProjection = "on"
	if !slices.ContainsFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, "PIN_SHUTDOWN_DRAIN=") }) {
		cfg.ShutdownDrain = 0 // no load balancer to drain: Ctrl-C stops at once
	}

	s, err := openServer(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	s.dev = true
	stopBroker, err := s.prepareDevDatabaseAndBroker(ctx)
	if err != nil {
		return err
	}
	defer stopBroker()

	if err := s.build(ctx); err != nil {
		return err
	}
	for _, entry := range modules() {
		if m := s.built[entry.name]; m != nil && entry.onDev != nil {
			if err := entry.onDev(ctx, m); err != nil {
				return err
			}
		}
	}
	if err := printDevHowTo(stdout, s.cfg, s.authn); err != nil {
		return err
	}
	return s.run(ctx)
}

// prepareDevDatabaseAndBroker migrates and marks the database, and starts
// the embedded broker unless PIN_KAFKA_BROKERS names one.
func (s *server) prepareDevDatabaseAndBroker(ctx context.Context) (stop func(), err error) {
	if err := postgres.Migrate(ctx, s.sqlDB); err != nil {
		return nil, err
	}
	if err := outbox.EnsureTopics(ctx, s.sqlDB, declaredTopics()...); err != nil {
		return nil, err
	}
	if err := markDevDatabase(ctx, s.sqlDB); err != nil {
		return nil, err
	}
	if len(s.cfg.KafkaBrokers) > 0 {
		return func() {}, nil
	}
	stop, err = kafka.StartEmbedded(s.cfg.DevKafkaAddr, declaredTopics()...)
	if err != nil {
		return nil, fmt.Errorf("dev: embedded Kafka-protocol broker on %s (PIN_DEV_KAFKA_ADDR): %w", s.cfg.DevKafkaAddr, err)
	}
	s.cfg.KafkaBrokers = []string{s.cfg.DevKafkaAddr}
	s.logger.InfoContext(ctx, "embedded Kafka-protocol broker started", "addr", s.cfg.DevKafkaAddr, "topics", declaredTopics())
	return stop, nil
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
	topics := declaredTopics() // the first is the current contract version's
	// The exports are what a second shell needs for the README's walk and
	// the runbooks, under the names they use (pin on the PATH, BASE,
	// BROKER, and PIN_KAFKA_BROKERS for pin status and the Kafka runbook);
	// the secret, and so the tokens, die with this process.
	fmt.Fprintf(w, `
pin dev is running (development only).

  API        %[1]s
  Kafka      %[2]s   topics %[9]s

In another shell (unless PIN_AUTH_JWT_SECRET was set, the secret is made for this run: the tokens die with it):
  export PIN_DATABASE_URL=%[4]s
  export PIN_KAFKA_BROKERS=%[10]s
  export PIN_AUTH_JWT_SECRET=%[5]s
  export BASE=%[1]s BROKER=%[2]s PATH=%[8]s:"$PATH"
  export TOKEN=%[6]s
  export ADMIN_TOKEN=%[7]s

Then follow "A first purchase, step by step" in README.md: a purchase, its boost, its expiry
(pin dev make-due $PURCHASE_ID, then pin expire-promotions --once) and its events:
  %[3]s

`, "http://"+cfg.HTTPAddr, cfg.KafkaBrokers[0], devKcatLine(topics[0]), shellQuote(cfg.DatabaseURL), cfg.JWTSecret, tenantToken, adminToken, shellQuote(filepath.Dir(pin)),
		strings.Join(topics, ", "), strings.Join(cfg.KafkaBrokers, ","))
	return nil
}

// devKcatLine reads topic's events from the beginning. The README's walk has
// the same line (TestReadmeWalkPastesIntoThePinDevShell).
func devKcatLine(topic string) string {
	return "kcat -C -b $BROKER -t " + topic + ` -o beginning -e -f 'partition=%p key=%k headers=%h\n%s\n\n'`
}

// shellQuote makes s one word for a POSIX shell (a database URL has & and ?).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

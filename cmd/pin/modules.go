package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/promotioncli"
	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// modules are the modules this binary hosts, in order: the one place in
// cmd/pin that names a module (TestOnlyTheListNamesModules). serve and dev
// build them onto the host; migrate, dev, `kafka create-topics`, the relay
// and `pin status` take their topics from here; `pin status` asks them for
// their sections and `pin COMMAND` for their operator commands. A new
// module is one entry (docs/architecture.md, "Adding a module"); a build
// with -tags pintestmodules adds the test-only ones (testOnlyModules).
func modules() []moduleEntry {
	return append([]moduleEntry{
		{
			name:   promotion.Name,
			topics: promotion.Topics(),
			build: func(p *platform, hd hostDeps) (host.Module, error) {
				return p.promotionModule(hd.authenticate, hd.outbox)
			},
			onDev:  func(ctx context.Context, m host.Module) error { return m.(*promotion.Module).SeedDemoPackages(ctx) },
			status: &statusSection{key: "expiry", read: readExpirySection, print: printExpirySection},
			// pin promotion …, pin contract verify; and expire-promotions,
			// which builds the module on a platform of its own.
			commands: withCommand(promotioncli.Commands(), "expire-promotions", expirePromotions),
			// The pool that runs the expiry job (ADR 0014, decision 7).
			idleInTransaction: promotion.ExpireIdleInTransaction,
		},
		{
			name: boost.Name,
			build: func(p *platform, hd hostDeps) (host.Module, error) {
				if p.cfg.BoostProjection != "on" {
					return nil, nil
				}
				consumerConfig := kafka.NewConsumerConfig("pin-"+boost.Name, kafkaSecurity(p.cfg))
				kafka.StaticMember(consumerConfig, groupInstance(p.cfg.HTTPAddr))
				return boost.New(boost.Deps{
					DB: p.db, APIDB: p.apiDB, Authenticate: hd.authenticate,
					Brokers: p.cfg.KafkaBrokers, Sarama: consumerConfig, Logger: p.logger, Registerer: p.reg,
				})
			},
			// boost consumes the promotion module's topics.
			consumes: []consumedTopics{{group: boost.Name, topics: promotion.Topics()}},
			replayers: func(logger *slog.Logger) []consumer.Replayer {
				return []consumer.Replayer{boost.DeadLetterReplayer(logger)}
			},
		},
	}, testOnlyModules...)
}

// testOnlyModules are added by modules_testonly.go in a build with -tags
// pintestmodules (make test): modules that prove the platform and ship in
// no binary.
var testOnlyModules []moduleEntry

// moduleEntry is how cmd/pin reaches one module; every field but name and
// build may be left out.
type moduleEntry struct {
	name string
	// topics are the outbox topics the module publishes to, known without
	// building it, as its host.EventSource declares them.
	topics []string
	// build makes the module for serve's and dev's host; a nil module is
	// one this configuration leaves off.
	build func(p *platform, hd hostDeps) (host.Module, error)
	// onDev runs on the built module before `pin dev` serves (demo data).
	onDev func(ctx context.Context, m host.Module) error
	// status is the module's section of `pin status`.
	status *statusSection
	// commands are the module's operator commands, by their first word.
	commands map[string]cli.Command
	// consumes are the consumer groups the module runs and what they read,
	// for `pin status`.
	consumes []consumedTopics
	// replayers hand the module's consumer dead letters back to it.
	replayers func(logger *slog.Logger) []consumer.Replayer
	// idleInTransaction, when set, bounds the runners' pool's sessions left
	// idle in a transaction, for a runner that needs it.
	idleInTransaction time.Duration
}

// hostDeps are what the host hands every module besides the platform.
type hostDeps struct {
	outbox *outbox.Publisher
	// authenticate is nil for a process that serves no HTTP.
	authenticate echo.MiddlewareFunc
}

// statusSection is one module's part of `pin status`: key in the JSON
// object, and its lines in the text.
type statusSection struct {
	key   string
	read  func(ctx context.Context, q postgres.Querier) (any, error)
	print func(w io.Writer, v any, asOf time.Time)
}

// consumedTopics are a consumer group and the topics it reads.
type consumedTopics struct {
	group  string
	topics []string
}

// promotionModule builds the promotion module; authenticate is nil for a
// process that serves no HTTP (`pin expire-promotions --once`).
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
		Expire:         promotion.ExpireSettingsOf(p.cfg),
	})
}

func readExpirySection(ctx context.Context, q postgres.Querier) (any, error) {
	return promotion.ReadExpiryStatus(ctx, q)
}

// printExpirySection writes the expiry's lines of `pin status`.
func printExpirySection(w io.Writer, v any, asOf time.Time) {
	e := v.(promotion.ExpiryStatus)
	at := func(t time.Time) string { return t.Format(time.RFC3339) }
	due := "none due"
	if e.OldestDueEndsAt != nil {
		due = "oldest due since " + at(*e.OldestDueEndsAt)
	}
	fmt.Fprintf(w, "expiry\tbacklog %d (%s), poison %d\n", e.Backlog, due, e.Poison)
	if c := e.LastCycle; c == nil {
		fmt.Fprintf(w, "\tlast cycle: none recorded\n")
	} else {
		outcome := "completed"
		if c.Error != "" {
			outcome = "FAILED: " + c.Error
		}
		fmt.Fprintf(w, "\tlast cycle %s (%s ago) by %s: %s; expired %d, skipped locked %d, failed %d, %d ms\n",
			at(c.FinishedAt), asOf.Sub(c.FinishedAt).Round(time.Second), c.Instance, outcome,
			c.Cycle.Expired, c.Cycle.SkippedLocked, c.Cycle.Failed, c.Cycle.Duration.Milliseconds())
	}
}

// moduleCommand is the operator command a module answers to name, or nil.
func moduleCommand(name string) cli.Command {
	for _, m := range modules() {
		if c, ok := m.commands[name]; ok {
			return c
		}
	}
	return nil
}

// withCommand is commands and the command name.
func withCommand(commands map[string]cli.Command, name string, command cli.Command) map[string]cli.Command {
	commands[name] = command
	return commands
}

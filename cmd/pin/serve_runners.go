package main

import (
	"net"
	"os"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
)

// The background work build puts on the host beside the modules' own
// runners: the outbox's relay and retention, and the boost projection.

// addOutboxRunners adds the outbox relay and retention of the topics the
// modules declared; the relay also exports the outbox metrics.
func (s *server) addOutboxRunners() error {
	topics := s.host.OutboxTopics()
	if err := checkDeclaredTopics(topics); err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	outboxRelay, err := relay.New(s.sqlDB, relay.Config{
		Brokers:      s.cfg.KafkaBrokers,
		Topics:       topics,
		PollInterval: s.cfg.OutboxPollInterval,
		Sarama:       kafka.NewProducerConfig("pin-outbox-relay", kafkaSecurity(s.cfg)),
		// The lock-holder query of docs/runbooks/outbox-backlog.md shows it.
		ApplicationName: postgres.ApplicationName("relay"),
	}, s.logger, s.reg, s.tp)
	if err != nil {
		return err
	}
	s.host.AddRunner(outboxRelay)
	cleaner, err := relay.NewRetentionCleaner(s.sqlDB, relay.RetentionConfig{
		Topics:    topics,
		Retention: s.cfg.OutboxRetention,
	}, s.logger)
	if err != nil {
		return err
	}
	s.host.AddRunner(cleaner)
	return nil
}

// addBoostProjection adds the reference consumer of the module's event.
func (s *server) addBoostProjection() error {
	consumerConfig := kafka.NewConsumerConfig("pin-"+boost.Name, kafkaSecurity(s.cfg))
	kafka.StaticMember(consumerConfig, groupInstance(s.cfg.HTTPAddr))
	projection, err := boost.New(boost.Deps{
		DB:           s.db,
		APIDB:        s.apiDB,
		Authenticate: s.authn.Middleware(),
		Brokers:      s.cfg.KafkaBrokers,
		Sarama:       consumerConfig,
		Logger:       s.logger,
		Registerer:   s.reg,
	})
	if err != nil {
		return err
	}
	s.host.AddModule(projection)
	return nil
}

// groupInstance names this process in its consumer groups: its host and
// HTTP port, which a restart keeps and no two live processes share
// (docs/adr/0020-consumer-group-after-crashes.md). A random port (0) names
// nothing, and the process joins as a dynamic member.
func groupInstance(httpAddr string) string {
	_, port, err := net.SplitHostPort(httpAddr)
	host, herr := os.Hostname()
	if err != nil || herr != nil || port == "0" {
		return ""
	}
	return host + "-" + port // Kafka allows letters, digits, ".", "_" and "-"
}

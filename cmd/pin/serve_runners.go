package main

import (
	"net"
	"os"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
)

// The modules build puts on the host, and the background work beside their
// own runners: the outbox's relay and retention.

// addModules builds every module of the list this configuration turns on
// and puts it on the host.
func (s *server) addModules(hd hostDeps) error {
	s.built = map[string]host.Module{}
	for _, entry := range modules() {
		m, err := entry.build(s.platform, hd)
		if err != nil {
			return err
		}
		if m == nil {
			continue
		}
		s.built[entry.name] = m
		s.host.AddModule(m)
	}
	return nil
}

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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/kafka"
)

// moduleTopics are the topics the modules publish to, as they must exist.
func moduleTopics(names []string) []kafka.Topic {
	topics := make([]kafka.Topic, len(names))
	for i, name := range names {
		topics[i] = kafka.Topic{Name: name, Partitions: kafka.TopicPartitions}
	}
	return topics
}

// kafkaSecurity carries the validated PIN_KAFKA_SASL_* and PIN_KAFKA_TLS*
// settings to the Kafka clients.
func kafkaSecurity(cfg config.Config) kafka.Security {
	return kafka.Security{
		SASLMechanism: cfg.KafkaSASLMechanism,
		SASLUsername:  cfg.KafkaSASLUsername,
		SASLPassword:  cfg.KafkaSASLPassword,
		TLS:           cfg.KafkaTLSConfig,
	}
}

// kafkaCommand runs `pin kafka create-topics [--replication-factor N]
// [--retention D]`: it creates the module's missing topics on
// PIN_KAFKA_BROKERS and prints one line per topic saying what it did.
func kafkaCommand(_ context.Context, args, environ []string, stdout io.Writer) error {
	const synopsis = "kafka create-topics [--replication-factor N] [--retention D]"
	if len(args) > 0 && cli.IsHelp(args[0]) {
		return cli.ParseFlags(cli.NewFlags("kafka"), synopsis, args[:1], stdout)
	}
	if len(args) == 0 || args[0] != "create-topics" {
		return cli.Usage("kafka: the only subcommand is create-topics")
	}
	fs := cli.NewFlags("kafka create-topics")
	replication := fs.Int("replication-factor", 3, "replicas of each partition of a created topic")
	retention := fs.Duration("retention", 7*24*time.Hour, "retention.ms of a created topic, as a Go duration")
	if err := cli.ParseFlags(fs, synopsis, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("kafka create-topics: unexpected argument %q", fs.Arg(0))
	}
	if *replication < 1 || *replication > 32767 {
		return cli.Usagef("kafka create-topics: --replication-factor %d must be 1 or more", *replication)
	}
	if *retention < time.Hour {
		return cli.Usagef("kafka create-topics: --retention %s must be at least 1h", *retention)
	}
	cfg, err := config.Load(environ, config.NeedKafka)
	if err != nil {
		return err
	}
	results, err := kafka.CreateTopics(cfg.KafkaBrokers, kafkaSecurity(cfg), moduleTopics(declaredTopics()), kafka.CreateOptions{
		ReplicationFactor: int16(*replication),
		Retention:         *retention,
	})
	for _, r := range results {
		if r.Created {
			fmt.Fprintf(stdout, "created %s: %d partitions, replication factor %d, retention %s\n", r.Name, r.Partitions, *replication, *retention)
		} else {
			fmt.Fprintf(stdout, "found %s: %d partitions (needs %d), left as it is\n", r.Name, r.Found, r.Partitions)
		}
	}
	if errors.Is(err, kafka.ErrPartitionCount) {
		return fmt.Errorf("kafka create-topics: %w (see docs/runbooks/kafka.md)", err)
	}
	if err != nil {
		return fmt.Errorf("kafka create-topics: %w", err)
	}
	return nil
}

package testbed

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaPartitions is the partition count of every topic NewKafka seeds; it
// matches the production topic (3 partitions).
const KafkaPartitions = 3

// NewKafka starts an in-process Kafka-protocol broker (franz-go's kfake) on
// a free 127.0.0.1 port with topics created, each with KafkaPartitions
// partitions, and stops it when tb ends. It returns the bootstrap brokers.
func NewKafka(tb testing.TB, topics ...string) []string {
	tb.Helper()
	return NewSecureKafka(tb, KafkaSecurity{}, topics...)
}

// KafkaSecurity is what a secured test broker demands.
type KafkaSecurity struct {
	// TLS is the broker's TLS configuration (see CA.ServerTLS); nil is
	// plaintext.
	TLS *tls.Config
	// Users are the SASL accounts; none means no SASL.
	Users []KafkaUser
	// ACLs turns authorization on: only superusers and the grants of
	// KafkaUser.Allow pass.
	ACLs bool
}

// KafkaUser is a SASL account of a test broker.
type KafkaUser struct {
	Mechanism, Name, Password string
	// Superuser bypasses every ACL.
	Superuser bool
	// Allow lists the operations granted on the topics seeded (literal
	// names), e.g. kmsg.ACLOperationWrite.
	Allow []kmsg.ACLOperation
}

// NewSecureKafka is NewKafka with authentication, TLS and ACLs as sec says.
func NewSecureKafka(tb testing.TB, sec KafkaSecurity, topics ...string) []string {
	tb.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(KafkaPartitions, topics...))
	}
	if sec.TLS != nil {
		opts = append(opts, kfake.TLS(sec.TLS))
	}
	if len(sec.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
	}
	if sec.ACLs {
		opts = append(opts, kfake.EnableACLs())
	}
	for _, u := range sec.Users {
		if u.Superuser {
			opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
			continue
		}
		var acls []kfake.ACL
		for _, op := range u.Allow {
			for _, t := range topics {
				acls = append(acls, kfake.ACL{
					Resource:  kmsg.ACLResourceTypeTopic,
					Name:      t,
					Pattern:   kmsg.ACLResourcePatternTypeLiteral,
					Operation: op,
					Allow:     true,
				})
			}
		}
		opts = append(opts, kfake.User(u.Mechanism, u.Name, u.Password, acls...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("testbed: start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}

// SetMaxMessageBytes sets topic's max.message.bytes on the (unsecured) test
// broker, as an operator would on a real one: the broker then refuses a
// record batch larger than limit (kfake honours it), and "1048588" is
// Kafka's default again.
func SetMaxMessageBytes(tb testing.TB, brokers []string, topic, limit string) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatalf("testbed: kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	altered, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &limit}}, topic)
	if err == nil {
		err = altered[0].Err
	}
	if err != nil {
		tb.Fatalf("testbed: set max.message.bytes of %s to %s: %v", topic, limit, err)
	}
}

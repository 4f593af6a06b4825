package kafka_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

const secTopic = "pin.test.secured"

func TestProducerReachesASecuredBroker(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	clientPair, _ := ca.Issue(t, "pin")
	trust := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	mtls := trust.Clone()
	mtls.Certificates = []tls.Certificate{clientPair}
	stranger, _ := testbed.NewCA(t).Issue(t, "pin")
	untrusted := trust.Clone()
	untrusted.Certificates = []tls.Certificate{stranger}

	tests := []struct {
		name   string
		broker testbed.KafkaSecurity
		client kafka.Security
		wantOK bool
	}{
		{"SCRAM-SHA-512 over TLS", brokerWith(ca.ServerTLS(t, nil), kafka.MechanismSCRAMSHA512), scram(kafka.MechanismSCRAMSHA512, "right", trust), true},
		{"SCRAM-SHA-256 over TLS", brokerWith(ca.ServerTLS(t, nil), kafka.MechanismSCRAMSHA256), scram(kafka.MechanismSCRAMSHA256, "right", trust), true},
		{"PLAIN over TLS", brokerWith(ca.ServerTLS(t, nil), kafka.MechanismPlain), scram(kafka.MechanismPlain, "right", trust), true},
		{"mTLS", testbed.KafkaSecurity{TLS: ca.ServerTLS(t, ca.Pool)}, kafka.Security{TLS: mtls}, true},
		{"wrong password", brokerWith(ca.ServerTLS(t, nil), kafka.MechanismSCRAMSHA512), scram(kafka.MechanismSCRAMSHA512, "wrong", trust), false},
		{"untrusted client certificate", testbed.KafkaSecurity{TLS: ca.ServerTLS(t, ca.Pool)}, kafka.Security{TLS: untrusted}, false},
		{"broker not trusted", brokerWith(ca.ServerTLS(t, nil), kafka.MechanismSCRAMSHA512), scram(kafka.MechanismSCRAMSHA512, "right", &tls.Config{MinVersion: tls.VersionTLS12}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			brokers := testbed.NewSecureKafka(t, tt.broker, secTopic)
			err := produceOne(brokers, tt.client)
			if tt.wantOK {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), "wrong", "the password never appears in an error")
		})
	}
}

// TestProducerNeedsOnlyWriteOnTheTopic shows the ACLs of README.md
// ("Running in production", "Producer ACLs") suffice: WRITE on the topic (which implies DESCRIBE)
// lets the idempotent producer publish; a user with READ only cannot.
func TestProducerNeedsOnlyWriteOnTheTopic(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:  ca.ServerTLS(t, nil),
		ACLs: true,
		Users: []testbed.KafkaUser{
			{Mechanism: kafka.MechanismSCRAMSHA512, Name: "writer", Password: "w", Allow: []kmsg.ACLOperation{kmsg.ACLOperationWrite}},
			{Mechanism: kafka.MechanismSCRAMSHA512, Name: "reader", Password: "r", Allow: []kmsg.ACLOperation{kmsg.ACLOperationRead}},
		},
	}, secTopic)
	trust := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	send := func(user, password string) error {
		return produceOne(brokers, kafka.Security{SASLMechanism: kafka.MechanismSCRAMSHA512, SASLUsername: user, SASLPassword: password, TLS: trust})
	}
	require.NoError(t, send("writer", "w"))
	require.Error(t, send("reader", "r"), "ACLs are enforced")
}

// A topic the user may not describe (a write-only user and a topic not made
// yet) is named in the error; the topics it may describe are still reported.
func TestDescribeTopicsReportsTheOthersBesideARefusedOne(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	const secTopic = "pin.sec.described.v1"
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:   ca.ServerTLS(t, nil),
		ACLs:  true,
		Users: []testbed.KafkaUser{{Mechanism: kafka.MechanismSCRAMSHA512, Name: "writer", Password: "w", Allow: []kmsg.ACLOperation{kmsg.ACLOperationWrite}}},
	}, secTopic)
	sec := scram(kafka.MechanismSCRAMSHA512, "w", &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	sec.SASLUsername = "writer"
	states, err := kafka.DescribeTopics(brokers, sec, []string{"pin.sec.unmade.v1", secTopic})
	require.ErrorContains(t, err, "pin.sec.unmade.v1")
	require.Equal(t, []kafka.TopicState{{Name: secTopic, Partitions: 3}}, states)
}

func TestCreateTopicsIsIdempotent(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:   ca.ServerTLS(t, nil),
		ACLs:  true,
		Users: []testbed.KafkaUser{{Mechanism: kafka.MechanismSCRAMSHA512, Name: "admin", Password: "a", Superuser: true}},
	}, "existing.six")
	sec := scram(kafka.MechanismSCRAMSHA512, "a", &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	sec.SASLUsername = "admin"
	topics := []kafka.Topic{{Name: secTopic, Partitions: 3}}
	opts := kafka.CreateOptions{ReplicationFactor: 1, Retention: 7 * 24 * time.Hour}

	res, err := kafka.CreateTopics(brokers, sec, topics, opts)
	require.NoError(t, err)
	require.Equal(t, []kafka.TopicResult{{Topic: topics[0], Created: true}}, res)
	res, err = kafka.CreateTopics(brokers, sec, topics, opts)
	require.NoError(t, err)
	require.Equal(t, []kafka.TopicResult{{Topic: topics[0], Found: 3}}, res, "a second run finds it")

	states, err := kafka.DescribeTopics(brokers, sec, []string{secTopic, "missing"})
	require.NoError(t, err)
	require.Equal(t, []kafka.TopicState{{Name: secTopic, Partitions: 3}, {Name: "missing"}}, states)

	admin, err := sarama.NewClusterAdmin(brokers, kafka.AdminConfig("test", sec))
	require.NoError(t, err)
	defer admin.Close()
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: secTopic, ConfigNames: []string{"retention.ms"}}}, sarama.DescribeConfigsOptions{})
	require.NoError(t, err)
	require.Len(t, results, 1)
	require.Len(t, results[0].Configs, 1)
	require.Equal(t, "604800000", results[0].Configs[0].Value, "7 days")

	// The seeded topic has 3 partitions; a declaration of 6 is reported.
	_, err = kafka.CreateTopics(brokers, sec, []kafka.Topic{{Name: "existing.six", Partitions: 6}}, opts)
	require.ErrorIs(t, err, kafka.ErrPartitionCount)
}

func TestTopicCheckExportsThePartitionCount(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:   ca.ServerTLS(t, nil),
		Users: []testbed.KafkaUser{{Mechanism: kafka.MechanismSCRAMSHA512, Name: "admin", Password: "a", Superuser: true}},
	})
	sec := scram(kafka.MechanismSCRAMSHA512, "a", &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	sec.SASLUsername = "admin"
	reg := prometheus.NewRegistry()
	var logs testbed.LogBuffer
	check, err := kafka.NewTopicCheck(brokers, sec, []kafka.Topic{{Name: secTopic, Partitions: 3}}, 20*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	require.NoError(t, err)
	testbed.StartRunner(t, check)

	gauge := func() (float64, bool) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "pin_kafka_topic_partitions" && m.GetLabel()[0].GetValue() == secTopic {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	is := func(want float64) func() error {
		return func() error {
			if v, ok := gauge(); !ok || v != want {
				return fmt.Errorf("partition gauge: want %v, have %v (exported: %v); log:\n%s", want, v, ok, logs.String())
			}
			return nil
		}
	}
	testbed.Eventually(t, is(0)) // a missing topic is 0
	testbed.Eventually(t, func() error {
		if !strings.Contains(logs.String(), "kafka topic missing") {
			return errors.New("the missing topic is not logged")
		}
		return nil
	})

	_, err = kafka.CreateTopics(brokers, sec, []kafka.Topic{{Name: secTopic, Partitions: 3}}, kafka.CreateOptions{ReplicationFactor: 1, Retention: time.Hour})
	require.NoError(t, err)
	testbed.Eventually(t, is(3)) // a later check sees the topic
}

func brokerWith(server *tls.Config, mechanism string) testbed.KafkaSecurity {
	return testbed.KafkaSecurity{TLS: server, Users: []testbed.KafkaUser{{Mechanism: mechanism, Name: "pin", Password: "right", Superuser: true}}}
}

func scram(mechanism, password string, trust *tls.Config) kafka.Security {
	return kafka.Security{SASLMechanism: mechanism, SASLUsername: "pin", SASLPassword: password, TLS: trust}
}

// produceOne sends one record to secTopic with the outbox relay's producer
// configuration and sec.
func produceOne(brokers []string, sec kafka.Security) error {
	producer, err := sarama.NewSyncProducer(brokers, kafka.NewProducerConfig("test", sec))
	if err != nil {
		return err
	}
	defer producer.Close()
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: secTopic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v")})
	return err
}

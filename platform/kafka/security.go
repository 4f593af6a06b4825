package kafka

import (
	"crypto/tls"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// SASL mechanisms the service speaks.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Security is how the service authenticates to a Kafka cluster and protects
// the connection. The zero value is an anonymous plaintext connection.
type Security struct {
	// SASLMechanism is "" (no SASL) or one of the Mechanism constants.
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
	// TLS, when not nil, wraps every connection to the brokers.
	TLS *tls.Config
}

// LogValue describes s for a log line without the password.
func (s Security) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("sasl_mechanism", s.SASLMechanism),
		slog.String("sasl_username", s.SASLUsername),
		slog.Bool("tls", s.TLS != nil),
	)
}

// Apply sets c's network security from s; every Sarama client of the
// service (producer, admin) goes through it.
func (s Security) Apply(c *sarama.Config) {
	if s.TLS != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = s.TLS.Clone()
	}
	if s.SASLMechanism == "" {
		return
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.Version = sarama.SASLHandshakeV1
	c.Net.SASL.Mechanism = sarama.SASLMechanism(s.SASLMechanism)
	c.Net.SASL.User = s.SASLUsername
	c.Net.SASL.Password = s.SASLPassword
	switch s.SASLMechanism {
	case MechanismSCRAMSHA256:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case MechanismSCRAMSHA512:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	}
}

// NewProducerConfig is ProducerConfig with the security settings applied:
// what the outbox relay needs to reach a production cluster.
func NewProducerConfig(clientID string, sec Security) *sarama.Config {
	c := ProducerConfig(clientID)
	sec.Apply(c)
	return c
}

// NewConsumerConfig is ConsumerConfig with the security settings applied,
// for consumers (platform/consumer) of a production cluster.
func NewConsumerConfig(clientID string, sec Security) *sarama.Config {
	c := ConsumerConfig(clientID)
	sec.Apply(c)
	return c
}

// scramClient adapts xdg-go/scram (the SCRAM implementation Sarama's own
// examples use) to sarama.SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

package kafka

import (
	"time"

	"github.com/IBM/sarama"
)

// ConsumerConfig returns the Sarama configuration of a consumer-group
// subscriber (platform/consumer):
//
//   - Version 2.1, for record headers and the consumer-group protocol;
//   - a new group starts at the oldest offset, so a new projection is built
//     from the whole topic, not only from what arrives after it started;
//   - marked offsets are committed every second: a consumer marks a record
//     only after its database transaction committed, so a crash re-delivers
//     at most the last second, which the inbox then skips;
//   - consumer errors are returned, so the subscriber logs them.
func ConsumerConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_1_0_0
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = time.Second
	setNetworkDefaults(c)
	return c
}

// setNetworkDefaults sets what producer and consumer share: short dial and
// metadata retries, so an unreachable broker is reported within seconds, and
// metadata of the topics in use only, not the whole cluster's.
func setNetworkDefaults(c *sarama.Config) {
	c.Net.DialTimeout = 3 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 2
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Metadata.Full = false
}

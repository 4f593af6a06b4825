//go:build !production

package kafka

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// EmbeddedPartitions is the partition count of the topics StartEmbedded
// creates, as in production.
const EmbeddedPartitions = TopicPartitions

// StartEmbedded starts an in-process Kafka-protocol broker (franz-go's
// kfake) listening on addr (host:port) with topics created. It is for
// `pin dev` only: the data lives in memory and is gone when close is called
// or the process exits.
func StartEmbedded(addr string, topics ...string) (close func(), err error) {
	c, err := NewEmbedded(addr, topics...)
	if err != nil {
		return nil, err
	}
	return c.Close, nil
}

// NewEmbedded is StartEmbedded for a caller that steers the broker through
// kfake's control functions (`pin contract verify --crash` watches the
// consumer's offset commits); port 0 picks a free one (ListenAddrs).
func NewEmbedded(addr string, topics ...string) (*kfake.Cluster, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("kafka: embedded broker address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("kafka: embedded broker port %q: %w", portStr, err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// kfake listens on 127.0.0.1 unless told otherwise.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(EmbeddedPartitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: start embedded broker on %s: %w", addr, err)
	}
	return c, nil
}

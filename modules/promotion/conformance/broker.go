//go:build !production

package conformance

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
)

// errKilledAtCommit closes the connection of a consumer killed before its
// offset commit was applied.
var errKilledAtCommit = errors.New("contract verify: the consumer was killed at this commit")

// startVerifyBroker starts the embedded Kafka-protocol broker of `pin
// contract verify` (the one `pin dev` runs) on a free port, with the topic
// created, and lets the run watch every offset commit before it is applied.
func startVerifyBroker() (*verifyBroker, error) {
	c, err := kafka.NewEmbedded("127.0.0.1:0", contract.Topic)
	if err != nil {
		return nil, err
	}
	return &verifyBroker{addrs: c.ListenAddrs(), close: c.Close, onCommit: func(fn func(*kmsg.OffsetCommitRequest, func(func())) bool) {
		c.ControlKey(kmsg.OffsetCommit.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if drop := fn(r.(*kmsg.OffsetCommitRequest), c.SleepControl); drop {
				return nil, errKilledAtCommit, true
			}
			return nil, nil, false
		})
	}}, nil
}

package promotion_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
)

// TestHeadersAreTheMarshalers: the headers the platform's marshaler writes
// for a message carrying every metadata key are exactly the ones the
// contract names, so a rename on either side fails here.
func TestHeadersAreTheMarshalers(t *testing.T) {
	t.Parallel()
	msg := message.NewMessage("5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11", []byte(`{}`))
	for _, key := range []string{kafka.MetaPartitionKey, kafka.MetaEventType, kafka.MetaContractVersion,
		kafka.MetaCorrelationID, kafka.MetaTraceparent, kafka.MetaEventOrigin} {
		msg.Metadata.Set(key, "x")
	}
	rec, err := kafka.Marshaler{}.Marshal(contract.Topic, msg)
	require.NoError(t, err)
	var written []string
	for _, h := range rec.Headers {
		written = append(written, string(h.Key))
	}
	require.ElementsMatch(t, []string{contract.HeaderMessageID, contract.HeaderEventType, contract.HeaderContractVersion,
		contract.HeaderCorrelationID, contract.HeaderTraceparent, contract.HeaderEventOrigin}, written)
}

package outbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestKcatReadsTheForwardedRecord reads the record back with kcat
// (librdkafka), an independent Kafka client, the way an operator would.
func TestKcatReadsTheForwardedRecord(t *testing.T) {
	t.Parallel()
	kcat := testbed.Tool(t, "kcat", "Debian: apt-get install -y kcat")
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	b.startRelay(t, relay.Config{Brokers: brokers}, nil)

	purchaseID := uuid.NewString()
	msg := event(purchaseID, 1)
	msg.Metadata.Set(kafka.MetaCorrelationID, "req-kcat")
	b.publish(t, msg)
	newConsumer(t, brokers).until(t, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(brokers, ","), "-t", topic,
		"-o", "beginning", "-e", "-q", "-J")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())

	// kcat -J prints one JSON object per record; headers are a flat
	// [name, value, name, value...] list in record order.
	type kcatRecord struct {
		Topic   string   `json:"topic"`
		Key     string   `json:"key"`
		Payload string   `json:"payload"`
		Headers []string `json:"headers"`
	}
	var records []kcatRecord
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			var r kcatRecord
			require.NoError(t, json.Unmarshal([]byte(line), &r), line)
			records = append(records, r)
		}
	}
	require.Len(t, records, 1, stdout.String())
	r := records[0]
	require.Equal(t, topic, r.Topic)
	require.Equal(t, purchaseID, r.Key)
	require.Equal(t, string(msg.Payload), r.Payload)
	require.Equal(t, []string{
		"message_id", msg.UUID,
		"event_type", "pin.promotion.purchase-changed",
		"contract_version", "1",
		"correlation_id", "req-kcat",
	}, r.Headers, "exactly these headers, no traceparent without a trace")
}

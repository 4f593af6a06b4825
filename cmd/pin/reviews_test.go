//go:build pintestmodules

package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/cmd/pin/testdata/modules/reviews"
	"github.com/pinmarket/pin/platform/testbed"
)

func init() { testOnlyTopics = append(testOnlyTopics, reviews.Topic) }

// TestASecondModulePublishesThroughTheOutbox: the reviews module, one
// entry of the list, publishes its event on one HTTP call through the
// outbox; the relay sends both modules' topics, `pin status` shows both,
// and the test database had its table from the same list.
func TestASecondModulePublishesThroughTheOutbox(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, topic, reviews.Topic)
	s := startServer(t, serveEnv(t, db, brokers), "serve")

	code, review := s.do(t, http.MethodPost, reviews.Path, token(t, uuid.New()), map[string]any{"text": "a fine project"})
	require.Equal(t, http.StatusCreated, code, "%v", review)
	purchaseID, _ := sellOne(t, s)

	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic, reviews.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer client.Close()
	keys := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	for len(keys) < 2 && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			keys[r.Topic] = string(r.Key)
			if r.Topic == reviews.Topic {
				var posted reviews.ReviewPosted
				require.NoError(t, json.Unmarshal(r.Value, &posted), string(r.Value))
				require.Equal(t, "a fine project", posted.Text)
			}
		})
	}
	require.Equal(t, map[string]string{reviews.Topic: review["reviewId"].(string), topic: purchaseID}, keys)

	out, stderr, code := run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var st struct {
		Outbox []struct {
			Topic string `json:"topic"`
		} `json:"outbox"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Outbox, 2, out)
	require.Equal(t, []string{topic, reviews.Topic}, []string{st.Outbox[0].Topic, st.Outbox[1].Topic})
}

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/contracttest"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestPurchasesStayInVersionOrderThroughRefusedActivations sets the topic's
// max.message.bytes below an event, so the broker refuses every purchase's
// activation and the relay dead-letters it. Purchases are bought; one is
// cancelled while the limit is low, and, with the limit restored, one is
// cancelled and one expired: their events wait behind the dead letters,
// which `pin status` and `dead-letters list` show, while a new purchase
// goes by. Then the operator replays the dead letters (or discards them):
// every purchase's records are on the topic in version order, and the
// conformance kit's reference consumers (billing, notifications), fed the
// topic, pass contracttest.CheckDelivered on what was delivered.
func TestPurchasesStayInVersionOrderThroughRefusedActivations(t *testing.T) {
	t.Parallel()
	for _, operator := range []string{"replay", "discard"} {
		t.Run(operator, func(t *testing.T) {
			t.Parallel()
			db := testbed.NewDatabase(t)
			dbEnv := []string{"PIN_DATABASE_URL=" + db.URL}
			brokers := testbed.NewKafka(t, topic)
			s := startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=off"), "serve")
			code, created := s.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", token(t, uuid.New(), "admin"), map[string]any{
				"code": "order-pipeline", "name": "order", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 3,
				"price": map[string]any{"amount": 10, "currencyId": 643},
			})
			require.Equal(t, http.StatusCreated, code, "%v", created)
			pkg := created["id"].(string)
			tok := token(t, uuid.New())
			cancel := func(id string) {
				t.Helper()
				code, body := s.do(t, http.MethodPost, "/api/developers/v1/promotions/"+id+"/cancel", tok, map[string]any{"reason": "order"})
				require.Equal(t, http.StatusOK, code, "%v", body)
			}
			reader := newTopicReader(t, brokers)
			before := s.purchaseProject(t, tok, pkg, uuid.NewString())
			reader.awaitKey(t, before, time.Now().Add(testbed.ForwardDeadline))

			testbed.SetMaxMessageBytes(t, brokers, topic, "512")
			var refused []string // their activations
			for range 4 {
				refused = append(refused, s.purchaseProject(t, tok, pkg, uuid.NewString()))
			}
			testbed.Eventually(t, func() error {
				if n := countRows(t, db, `SELECT count(*) FROM outbox.dead_letters`); n != len(refused) {
					return fmt.Errorf("%d dead letters", n)
				}
				return nil
			})
			cancel(refused[0])
			testbed.SetMaxMessageBytes(t, brokers, topic, "1048588")
			cancel(refused[1])
			_, err := db.SQL.Exec(`UPDATE promotion.promotion_purchases
				SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days' WHERE id = $1`, refused[2])
			require.NoError(t, err)
			_, stderr, code := run(t, dbEnv, "expire-promotions", "--once")
			require.Equal(t, 0, code, stderr)
			after := s.purchaseProject(t, tok, pkg, uuid.NewString())
			reader.awaitKey(t, after, time.Now().Add(testbed.ForwardDeadline))

			// Three events wait behind four held keys; nothing else does.
			testbed.Eventually(t, func() error {
				st := readHeldStatus(t, dbEnv)
				if st.Keys != 4 || st.Records != 3 || st.Backlog != 0 {
					return fmt.Errorf("held %+v", st)
				}
				return nil
			})
			stdout, stderr, code := run(t, dbEnv, "outbox", "dead-letters", "list")
			require.Equal(t, 0, code, stderr)
			waiting := map[string]int{}
			var ids []string
			for line := range strings.Lines(stdout) {
				var d struct {
					ID             int64  `json:"id"`
					Key            string `json:"key"`
					WaitingRecords int    `json:"waitingRecords"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &d), line)
				waiting[d.Key] = d.WaitingRecords
				ids = append(ids, fmt.Sprint(d.ID))
			}
			require.Equal(t, map[string]int{refused[0]: 1, refused[1]: 1, refused[2]: 1, refused[3]: 0}, waiting)
			for _, id := range refused {
				for _, r := range reader.records {
					require.NotEqual(t, id, string(r.Key), "nothing of a held purchase reaches the topic")
				}
			}

			if operator == "replay" {
				_, stderr, code = run(t, dbEnv, "outbox", "dead-letters", "replay", "--all")
			} else {
				_, stderr, code = run(t, dbEnv, append([]string{"outbox", "dead-letters", "discard", "--reason", "test: the activations are not wanted"}, ids...)...)
			}
			require.Equal(t, 0, code, stderr)

			// What the producer made, less what the operator discarded, must
			// be on the topic, each purchase's in version order.
			rows, err := db.SQL.Query(`SELECT DISTINCT ON (o.uuid) o.payload::text FROM outbox.pin_promotion_purchase_changed_v1 o
				WHERE NOT EXISTS (SELECT FROM outbox.dead_letters d WHERE d.message_id = o.uuid) ORDER BY o.uuid, o."offset"`)
			require.NoError(t, err)
			var made []contract.Envelope
			for rows.Next() {
				var payload string
				require.NoError(t, rows.Scan(&payload))
				e, err := contract.Decode([]byte(payload), slog.New(slog.DiscardHandler))
				require.NoError(t, err)
				made = append(made, e)
			}
			require.NoError(t, rows.Err())
			want := 2 + 4 + 3 // before and after, four activations, two cancellations and an expiry
			if operator == "discard" {
				want -= 4
			}
			require.Len(t, made, want)
			reader.readUntil(t, time.Now().Add(testbed.ForwardDeadline), "every event", func() bool {
				ids := map[string]bool{}
				for _, r := range reader.records {
					ids[recordHeaders(r)[contract.HeaderMessageID]] = true
				}
				for _, e := range made {
					if !ids[e.MessageID.String()] {
						return false
					}
				}
				return true
			})

			billing, notifier := &contracttest.Billing{Logger: slog.New(slog.DiscardHandler)}, &contracttest.Notifier{Logger: slog.New(slog.DiscardHandler)}
			versions := map[string][]int64{}
			for _, r := range reader.records {
				rec := contract.Record{Key: r.Key, Headers: recordHeaders(r), Value: r.Value}
				e, err := contract.DecodeRecord(rec, slog.New(slog.DiscardHandler))
				require.NoError(t, err)
				versions[string(r.Key)] = append(versions[string(r.Key)], e.Payload.Version)
				require.NoError(t, billing.Handle(context.Background(), rec))
				require.NoError(t, notifier.Handle(context.Background(), rec))
			}
			for id, vs := range versions {
				for i := 1; i < len(vs); i++ {
					require.Less(t, vs[i-1], vs[i], "purchase %s's records on the topic, in their order: %v", id, vs)
				}
			}
			for name, c := range map[string]contracttest.Consumer{"billing": billing.Consumer(), "notifications": notifier.Consumer()} {
				require.Empty(t, contracttest.CheckDelivered(context.Background(), c, made), "the %s reference consumer", name)
			}
		})
	}
}

// heldStatus is what `pin status --json` says of the topic's held keys.
type heldStatus struct {
	Backlog, Keys, Records int64
}

func readHeldStatus(t *testing.T, env []string) heldStatus {
	t.Helper()
	stdout, stderr, code := run(t, env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var s struct {
		Outbox []struct {
			Backlog int64 `json:"backlog"`
			Held    struct {
				Keys    int64 `json:"keys"`
				Records int64 `json:"records"`
			} `json:"held"`
		} `json:"outbox"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &s), stdout)
	require.Len(t, s.Outbox, 1+len(testOnlyTopics), "each declared topic, promotion's first")
	return heldStatus{Backlog: s.Outbox[0].Backlog, Keys: s.Outbox[0].Held.Keys, Records: s.Outbox[0].Held.Records}
}

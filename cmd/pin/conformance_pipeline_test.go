package main_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/contracttest"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestReferenceConsumersKeepTheContractThroughThePipeline runs the
// conformance kit's two reference consumers (billing: messageId dedupe
// alone; notifications: messageId and version) on what the real pipeline
// puts on the topic: purchases and cancellations through the API of two
// `pin serve`, the relay leader frozen (SIGSTOP) and replaced, then woken;
// a snapshot (Active, then --include-ended) and a dead letter of the relay
// repaired and replayed in the middle; an expiry cycle and a cancellation
// after them. Every record read is handed to both; each transition's side
// effect must happen once, none go backwards. A snapshot that wrote a new
// messageId (as the first version did, and --send-derived-ids does for a
// purchase whose messageId is lost) would make billing invoice twice.
func TestReferenceConsumersKeepTheContractThroughThePipeline(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	dbEnv := []string{"PIN_DATABASE_URL=" + db.URL}
	brokers := testbed.NewKafka(t, topic)
	const active = `pin_outbox_relay_active{topic="` + topic + `"}`
	leader := startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=off"), "serve")
	testbed.Eventually(t, func() error {
		if metricValue(t, leader, active) != 1 {
			return fmt.Errorf("the first instance is not the active relay yet")
		}
		return nil
	})
	standby := startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=off"), "serve")
	code, created := standby.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", token(t, uuid.New(), "admin"), map[string]any{
		"code": "conformance-pipeline", "name": "conformance", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 3,
		"price": map[string]any{"amount": 10, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", created)
	pkg := created["id"].(string)
	tok := token(t, uuid.New())
	cancel := func(s *server, id string) {
		t.Helper()
		code, body := s.do(t, http.MethodPost, "/api/developers/v1/promotions/"+id+"/cancel", tok, map[string]any{"reason": "conformance"})
		require.Equal(t, http.StatusOK, code, "%v", body)
	}
	var purchases []string
	for range 6 {
		purchases = append(purchases, leader.purchaseProject(t, tok, pkg, uuid.NewString()))
	}
	cancel(leader, purchases[0])

	// The leader freezes with its sockets open, perhaps in the middle of a
	// batch of the traffic; the standby's relay takes over while purchases
	// go on through its API; the leader wakes.
	before := countRows(t, db, `SELECT count(*) FROM outbox.pin_promotion_purchase_changed_v1`)
	traffic := startTraffic(standby.base, tok, pkg)
	testbed.Eventually(t, func() error {
		if n := countRows(t, db, `SELECT count(*) FROM outbox.pin_promotion_purchase_changed_v1`); n < before+4 {
			return fmt.Errorf("the traffic wrote %d events", n-before)
		}
		return nil
	})
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = leader.cmd.Process.Signal(syscall.SIGCONT) })
	for range 3 {
		purchases = append(purchases, standby.purchaseProject(t, tok, pkg, uuid.NewString()))
	}
	cancel(standby, purchases[1])
	testbed.Eventually(t, func() error {
		if metricValue(t, standby, active) != 1 {
			return fmt.Errorf("the standby has not taken the relay over yet")
		}
		return nil
	})
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGCONT))
	testbed.Eventually(t, func() error {
		if metricValue(t, leader, active) != 0 {
			return fmt.Errorf("the woken instance still counts itself the active relay")
		}
		return nil
	})
	written := traffic.stop(t)

	// In the middle: a snapshot of the Active purchases, then of the ended
	// ones too, as the runbook once advised billing.
	for _, args := range [][]string{{"promotion", "snapshot"}, {"promotion", "snapshot", "--include-ended"}} {
		_, stderr, code := run(t, dbEnv, args...)
		require.Equal(t, 0, code, "pin %v: %s", args, stderr)
	}
	// And a dead letter of the relay: a copy of a published event without
	// its key, repaired as the runbook says and replayed.
	_, err := db.SQL.Exec(`INSERT INTO outbox.pin_promotion_purchase_changed_v1 (uuid, payload, metadata)
		SELECT uuid, payload, (metadata::jsonb - 'partition_key')::json FROM outbox.pin_promotion_purchase_changed_v1
		WHERE payload->>'aggregateId' = $1 ORDER BY "offset" LIMIT 1`, purchases[2])
	require.NoError(t, err)
	testbed.Eventually(t, func() error {
		if n := countRows(t, db, `SELECT count(*) FROM outbox.dead_letters`); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	_, err = db.SQL.Exec(`UPDATE outbox.dead_letters
		SET metadata = jsonb_set(COALESCE(metadata::jsonb, '{}'), '{partition_key}', to_jsonb(payload->>'aggregateId'))::json`)
	require.NoError(t, err)
	_, stderr, code := run(t, dbEnv, "outbox", "dead-letters", "replay", "--all")
	require.Equal(t, 0, code, stderr)

	// Transitions after them: an expiry cycle and a cancellation.
	_, err = db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days' WHERE id = $1`, purchases[3])
	require.NoError(t, err)
	_, stderr, code = run(t, dbEnv, "expire-promotions", "--once")
	require.Equal(t, 0, code, stderr)
	cancel(standby, purchases[4])

	// The transitions the producer made, and every row the relay must send.
	// The keyless copy stays in the outbox, dead-lettered; its replay is a row of its own.
	rows, err := db.SQL.Query(`SELECT uuid::text, payload::text, COALESCE(metadata->>'event_origin', 'transition')
		FROM outbox.pin_promotion_purchase_changed_v1 WHERE metadata->>'partition_key' IS NOT NULL ORDER BY "offset"`)
	require.NoError(t, err)
	var made []contract.Envelope
	rowsOf, transitions := map[string]int{}, map[string]bool{}
	for rows.Next() {
		var id, payload, origin string
		require.NoError(t, rows.Scan(&id, &payload, &origin))
		rowsOf[id]++
		if origin != contract.EventOriginTransition || transitions[id] {
			continue
		}
		e, err := contract.Decode([]byte(payload), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		made, transitions[id] = append(made, e), true
	}
	require.NoError(t, rows.Err())
	require.Len(t, made, len(purchases)+4+written, "a purchase each, three cancellations, an expiry and the traffic's")

	reader := newTopicReader(t, brokers)
	var missing []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("records missing from the topic: %v", missing)
		}
	})
	reader.readUntil(t, time.Now().Add(testbed.ForwardDeadline), "every outbox row", func() bool {
		onTopic := map[string]int{}
		for _, r := range reader.records {
			onTopic[recordHeaders(r)[contract.HeaderMessageID]]++
		}
		missing = missing[:0]
		for id, n := range rowsOf {
			if onTopic[id] < n {
				missing = append(missing, fmt.Sprintf("%s: %d of %d", id, onTopic[id], n))
			}
		}
		return len(missing) == 0
	})
	snapshots, copies := 0, map[string]int{}
	billing, notifier := &contracttest.Billing{Logger: slog.New(slog.DiscardHandler)}, &contracttest.Notifier{Logger: slog.New(slog.DiscardHandler)}
	for _, r := range reader.records {
		rec := contract.Record{Key: r.Key, Headers: recordHeaders(r), Value: r.Value}
		if rec.Headers[contract.HeaderEventOrigin] == contract.EventOriginSnapshot {
			snapshots++
		}
		copies[rec.Headers[contract.HeaderMessageID]]++
		require.NoError(t, billing.Handle(context.Background(), rec))
		require.NoError(t, notifier.Handle(context.Background(), rec))
	}
	require.Greater(t, snapshots, len(purchases)-4, "the snapshots are on the topic: the Active purchases, then all")
	require.Greater(t, len(reader.records), len(copies), "redeliveries are on the topic")
	t.Logf("%d transitions, %d records on the topic (%d snapshot records); the woken leader counted %v sends it could not acknowledge",
		len(made), len(reader.records), snapshots, metricValue(t, leader, "pin_outbox_unacknowledged_sends_total"))

	for name, c := range map[string]contracttest.Consumer{"billing": billing.Consumer(), "notifications": notifier.Consumer()} {
		require.Empty(t, contracttest.CheckDelivered(context.Background(), c, made), "the %s reference consumer", name)
	}
}

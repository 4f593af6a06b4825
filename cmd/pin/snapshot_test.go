package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// The boost projection as the promotion tables compute it, and as the
// consumer holds it, one line per target.
const (
	boostFromPurchases = `
		SELECT t.target_kind || ' ' || t.target_id || ' ' || sum(p.boost_weight) || ' ' || count(*)
		FROM promotion.promotion_purchases p JOIN promotion.promotion_purchase_targets t ON t.purchase_id = p.id
		WHERE p.status = 'Active' GROUP BY t.target_kind, t.target_id ORDER BY 1`
	boostProjected = `
		SELECT target_kind || ' ' || target_id || ' ' || boost_weight || ' ' || active_purchases
		FROM boost.target_boosts ORDER BY 1`
	// snapshotPurchases are the purchase ids of a snapshot's outbox rows,
	// by its id ($1).
	snapshotPurchases = `SELECT payload->'payload'->>'purchaseId' FROM outbox.pin_promotion_purchase_changed_v1
		WHERE metadata->>'event_origin' = 'snapshot' AND metadata->>'correlation_id' = $1 ORDER BY 1`
)

// snapshotResult is the JSON line `pin promotion snapshot` prints.
type snapshotResult struct {
	SnapshotID       string `json:"snapshotId"`
	Events           int    `json:"events"`
	Failed           int    `json:"failed"`
	SkippedUnknownID int    `json:"skippedUnknownId"`
	SentDerivedID    int    `json:"sentDerivedId"`
	TotalEvents      int    `json:"totalEvents"`
	After            string `json:"after"`
	Complete         bool   `json:"complete"`
}

func parseSnapshotResult(t *testing.T, out string) snapshotResult {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, "one JSON line on stdout: %s", out)
	var res snapshotResult
	dec := json.NewDecoder(strings.NewReader(lines[0]))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&res), lines[0])
	return res
}

// TestPromotionSnapshotRedeliversATenantsActivePurchases runs `pin
// promotion snapshot --tenant T` beside `pin dev` (its boost projection
// on): a tenant with two Active purchases and one Cancelled gets "events":2.
// Each Active one soon has a second record on the topic: its transition's
// record again, value byte for byte (messageId, occurredAt, version,
// payload), with event_origin=snapshot and the snapshot id as
// correlation_id. The Cancelled one and another tenant's get none; the
// projection takes both as duplicates and is what it was. Bad command lines
// exit 2, an unknown snapshot id exits 1, and they write nothing.
func TestPromotionSnapshotRedeliversATenantsActivePurchases(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	s, kafkaAddr := startDevWithBroker(t, db)
	tenant := uuid.New()
	tok := token(t, tenant)
	pkg := s.packageID(t, tok, "project-boost-week")
	active := []string{s.purchaseProject(t, tok, pkg, uuid.NewString()), s.purchaseProject(t, tok, pkg, uuid.NewString())}
	cancelled := s.purchaseProject(t, tok, pkg, uuid.NewString())
	code, body := s.do(t, http.MethodPost, "/api/developers/v1/promotions/"+cancelled+"/cancel", tok, map[string]any{"reason": "test"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	s.purchaseProject(t, token(t, uuid.New()), pkg, uuid.NewString()) // another tenant's
	testbed.Eventually(t, func() error {
		if !appliedEverything(t, db) {
			return errors.New("the projection has not taken every transition yet")
		}
		return nil
	})
	before := queryStrings(t, db, boostProjected)
	duplicates := metricValue(t, s, `pin_consumer_duplicates_total{consumer="boost"}`)

	nilUUID := uuid.Nil.String()
	for _, args := range [][]string{
		{"--tenant", "not-a-uuid"}, {"--purchase", "x"}, {"--target-kind", "Billboard"}, {"--rate", "0"},
		{"--rate", "-3"}, {"--batch-size", "0"}, {"--after", "nope"}, {"extra"},
		{"--tenant", nilUUID}, {"--snapshot-id", nilUUID}, {"--purchase", nilUUID},
		{"--after", uuid.NewString()}, {"--tenant", tenant.String(), "--after", uuid.NewString()},
	} {
		_, stderr, code := run(t, env, append([]string{"promotion", "snapshot"}, args...)...)
		require.Equal(t, 2, code, "pin promotion snapshot %v: %s", args, stderr)
		require.Regexp(t, `^pin: promotion snapshot: .+\n$`, lastLine(stderr), "one line says what is wrong")
	}
	_, stderr, code := run(t, env, "promotion", "snapshot", "--snapshot-id", uuid.NewString())
	require.Equal(t, 1, code, "an unknown snapshot: %s", stderr)
	require.Contains(t, stderr, "no snapshot has the id")
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM outbox.pin_promotion_purchase_changed_v1
		WHERE metadata->>'event_origin' IS NOT NULL`), "a refused command line writes nothing")
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM promotion.snapshot_runs`), "and stores no snapshot")
	out, stderr, code := run(t, env, "promotion", "snapshot", "--help")
	require.Equal(t, 0, code, stderr)
	for _, flag := range []string{"-tenant", "-purchase", "-target-kind", "-include-ended", "-rate", "-after", "-snapshot-id"} {
		require.Contains(t, out, flag)
	}

	out, stderr, code = run(t, env, "promotion", "snapshot", "--tenant", tenant.String())
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"events":2`)
	res := parseSnapshotResult(t, out)
	require.True(t, res.Complete)
	require.NoError(t, uuid.Validate(res.SnapshotID))
	slices.Sort(active)
	require.Equal(t, active, queryStrings(t, db, snapshotPurchases, res.SnapshotID),
		"the Active ones of the tenant, not the Cancelled one nor another tenant's")

	for _, id := range active {
		records := purchaseRecords(t, []string{kafkaAddr}, nil, id, 2)
		require.Len(t, records, 2, "purchase %s: its transition and its snapshot", id)
		transition, snapshot := recordHeaders(records[0]), recordHeaders(records[1])
		require.NotContains(t, transition, "event_origin", "a transition carries no origin")
		require.Equal(t, "snapshot", snapshot["event_origin"])
		require.Equal(t, res.SnapshotID, snapshot["correlation_id"])
		require.Equal(t, transition["message_id"], snapshot["message_id"], "the same messageId: a redelivery")
		requireSameEvent(t, records[0].Value, records[1].Value)
		require.Equal(t, string(records[0].Value), string(records[1].Value), "the value, byte for byte")
		require.Equal(t, string(records[0].Key), string(records[1].Key))
		testbed.RequireValidJSON(t, contract.JSONSchema(), records[1].Value)
	}

	testbed.Eventually(t, func() error {
		if n := metricValue(t, s, `pin_consumer_duplicates_total{consumer="boost"}`); n < duplicates+2 {
			return fmt.Errorf("the projection took %v of the 2 snapshot records as duplicates", n-duplicates)
		}
		return nil
	})
	require.Equal(t, before, queryStrings(t, db, boostProjected), "the boost projection does not move")
}

// requireSameEvent fails t unless two record values carry one event: the
// same messageId, occurredAt, version, and payload equal as JSON.
func requireSameEvent(t *testing.T, want, got []byte) {
	t.Helper()
	type event struct {
		MessageID  string          `json:"messageId"`
		OccurredAt string          `json:"occurredAt"`
		Payload    json.RawMessage `json:"payload"`
	}
	var w, g event
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	require.Equal(t, w.MessageID, g.MessageID)
	require.Equal(t, w.OccurredAt, g.OccurredAt)
	require.JSONEq(t, string(w.Payload), string(g.Payload), "the payload, version included")
}

// lastLine is the last non-empty line of out, with its newline.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// recordHeaders are a record's headers by name.
func recordHeaders(r *kgo.Record) map[string]string {
	out := map[string]string{}
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

// TestPromotionSnapshotSkipsPurchasesWhoseMessageIDIsUnknown: a purchase
// whose row keeps no messageId (its event left the outbox before migration
// 00008) gets no record by default: the result line counts it
// ("skippedUnknownId") and stderr lists it, one JSON line, with a pointer to
// the runbook. --send-derived-ids sends it under the derived id, and says,
// in --help and in the run, that a consumer deduping by messageId alone
// counts it again.
func TestPromotionSnapshotSkipsPurchasesWhoseMessageIDIsUnknown(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	ids := purchasesThroughAPI(t, db, 3)
	slices.Sort(ids)
	legacy := ids[1]
	_, err := db.SQL.Exec(`UPDATE promotion.promotion_purchases SET last_event_id = NULL, last_event_at = NULL WHERE id = $1`, legacy)
	require.NoError(t, err)

	out, stderr, code := run(t, env, "promotion", "snapshot", "--help")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "-send-derived-ids")
	require.Contains(t, out, "counts each such record again")

	out, stderr, code = run(t, env, "promotion", "snapshot")
	require.Equal(t, 0, code, stderr)
	res := parseSnapshotResult(t, out)
	require.Equal(t, 2, res.Events)
	require.Equal(t, 1, res.SkippedUnknownID)
	require.Zero(t, res.SentDerivedID)
	require.Equal(t, []string{ids[0], ids[2]}, queryStrings(t, db, snapshotPurchases, res.SnapshotID), "no record for it")
	listed := unknownIDLines(t, stderr)
	require.Len(t, listed, 1, stderr)
	require.Equal(t, "skipped", listed[0]["unknownMessageId"])
	require.Equal(t, legacy, listed[0]["purchaseId"])
	require.Equal(t, "Active", listed[0]["status"])
	require.NotContains(t, listed[0], "derivedMessageId")
	require.Contains(t, stderr, "docs/runbooks/consumer-current-state.md")

	out, stderr, code = run(t, env, "promotion", "snapshot", "--send-derived-ids")
	require.Equal(t, 0, code, stderr)
	res = parseSnapshotResult(t, out)
	require.Equal(t, 3, res.Events)
	require.Zero(t, res.SkippedUnknownID)
	require.Equal(t, 1, res.SentDerivedID)
	require.Contains(t, stderr, "counts each such record again")
	listed = unknownIDLines(t, stderr)
	require.Len(t, listed, 1, stderr)
	require.Equal(t, "sent-under-derived-id", listed[0]["unknownMessageId"])
	require.Equal(t, legacy, listed[0]["purchaseId"])
	require.Equal(t, []string{listed[0]["derivedMessageId"].(string)}, queryStrings(t, db, `SELECT payload->>'messageId'
		FROM outbox.pin_promotion_purchase_changed_v1 WHERE metadata->>'correlation_id' = $1
		AND payload->'payload'->>'purchaseId' = $2`, res.SnapshotID, legacy), "sent under the id it lists")
}

// unknownIDLines are the JSON lines of stderr listing purchases whose
// messageId is unknown.
func unknownIDLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, `{"unknownMessageId"`) {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// TestPromotionSnapshotStopsAndResumes stops a slow snapshot (one event a
// second) with SIGINT once it has written its first event: it exits 1 after
// the batch in flight, prints its result so far and the command that
// resumes it, by its id alone; that command writes the rest under the same
// snapshot id, so every purchase has exactly one event of the snapshot.
// Resuming the complete snapshot writes nothing more.
func TestPromotionSnapshotStopsAndResumes(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	ids := purchasesThroughAPI(t, db, 4)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pinCmd(ctx, env, "promotion", "snapshot", "--rate", "1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	testbed.Eventually(t, func() error {
		if countRows(t, db, `SELECT count(*) FROM outbox.pin_promotion_purchase_changed_v1 WHERE metadata->>'event_origin' = 'snapshot'`) == 0 {
			return errors.New("no snapshot event yet")
		}
		return nil
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), "stopped before the end: %s", errOut.String())
	stopped := parseSnapshotResult(t, out.String())
	require.False(t, stopped.Complete)
	require.GreaterOrEqual(t, stopped.Events, 1)
	require.Less(t, stopped.Events, len(ids))
	resume := regexp.MustCompile(`to resume: pin (promotion snapshot .*)`).FindStringSubmatch(errOut.String())
	require.NotNil(t, resume, "how to resume: %s", errOut.String())
	require.Equal(t, "promotion snapshot --snapshot-id "+stopped.SnapshotID+" --rate 1 --batch-size 100", resume[1])

	args := strings.Fields(strings.Replace(resume[1], "--rate 1 ", "--rate 1000 ", 1))
	resumedOut, stderr, code := run(t, env, args...)
	require.Equal(t, 0, code, stderr)
	resumed := parseSnapshotResult(t, resumedOut)
	require.True(t, resumed.Complete)
	require.Equal(t, stopped.SnapshotID, resumed.SnapshotID)
	require.Equal(t, len(ids), stopped.Events+resumed.Events)
	require.Equal(t, len(ids), resumed.TotalEvents)
	slices.Sort(ids)
	require.Equal(t, ids, queryStrings(t, db, snapshotPurchases, stopped.SnapshotID),
		"every purchase once, across the stop")

	againOut, stderr, code := run(t, env, "promotion", "snapshot", "--snapshot-id", stopped.SnapshotID, "--after", ids[0])
	require.Equal(t, 0, code, stderr)
	again := parseSnapshotResult(t, againOut)
	require.Equal(t, snapshotResult{SnapshotID: stopped.SnapshotID, TotalEvents: len(ids), After: ids[len(ids)-1], Complete: true}, again,
		"a complete snapshot: nothing more, whatever --after says")
	require.Equal(t, ids, queryStrings(t, db, snapshotPurchases, stopped.SnapshotID))
}

// TestPromotionSnapshotResumesExactlyAfterSIGKILL kills a snapshot's
// process with SIGKILL three times, each once it has written more; each
// time the stored count equals the events in the outbox (a batch and its
// position commit together), and the id and the resume command were on
// stderr before the first batch. Resumed by its id alone, the snapshot ends
// with exactly one event per purchase, none twice.
func TestPromotionSnapshotResumesExactlyAfterSIGKILL(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	ids := purchasesThroughAPI(t, db, 24)
	const events = `SELECT count(*) FROM outbox.pin_promotion_purchase_changed_v1 WHERE metadata->>'event_origin' = 'snapshot'`

	var snapshotID string
	args := []string{"promotion", "snapshot", "--rate", "4", "--batch-size", "2"}
	for kill := range 3 {
		written := countRows(t, db, events)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := pinCmd(ctx, env, args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		require.NoError(t, cmd.Start())
		testbed.Eventually(t, func() error {
			if countRows(t, db, events) <= written {
				return fmt.Errorf("kill %d: no new snapshot event yet", kill)
			}
			return nil
		})
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		cancel()
		require.Equal(t, -1, cmd.ProcessState.ExitCode(), "killed: %s", errOut.String())
		started := regexp.MustCompile(`snapshot ([0-9a-f-]{36}): running .*resume it with: pin (promotion snapshot --snapshot-id ([0-9a-f-]{36}) .*)`).
			FindStringSubmatch(errOut.String())
		require.NotNil(t, started, "the id and the resume command, before the first batch: %s", errOut.String())
		if snapshotID == "" {
			snapshotID = started[1]
		}
		require.Equal(t, snapshotID, started[3])
		args = strings.Fields(started[2])

		var stored int
		require.NoError(t, db.SQL.QueryRow(`SELECT events FROM promotion.snapshot_runs WHERE id = $1`, snapshotID).Scan(&stored))
		require.Equal(t, countRows(t, db, events), stored, "kill %d: the stored position counts every event written, no more", kill)
		require.Less(t, stored, len(ids), "kill %d: killed before the end", kill)
	}

	out, stderr, code := run(t, env, "promotion", "snapshot", "--snapshot-id", snapshotID, "--rate", "1000")
	require.Equal(t, 0, code, stderr)
	res := parseSnapshotResult(t, out)
	require.True(t, res.Complete)
	require.Equal(t, len(ids), res.TotalEvents)
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM (SELECT payload->'payload'->>'purchaseId'
		FROM outbox.pin_promotion_purchase_changed_v1 WHERE metadata->>'event_origin' = 'snapshot'
		GROUP BY 1 HAVING count(*) > 1) twice`), "no purchase twice")
	slices.Sort(ids)
	require.Equal(t, ids, queryStrings(t, db, snapshotPurchases, snapshotID), "every purchase once, across three kills")
}

// TestBoostProjectionRebuiltFromASnapshotAlone: purchases, cancellations
// and expiries go through `pin serve` and its boost projection. Then the
// projection is emptied (its tables, inbox and versions, and its consumer
// group), the topic's records are deleted, and `pin promotion snapshot`
// writes the Active purchases' state. The projection rebuilt from those
// records alone equals the one the promotion tables compute.
func TestBoostProjectionRebuiltFromASnapshotAlone(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	api := startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=off"), "serve")
	consumer := startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=on"), "serve")
	tok := token(t, uuid.New())
	code, pkg := api.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", token(t, uuid.New(), "admin"), map[string]any{
		"code": "rebuild-test", "name": "rebuild test", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 4,
		"price": map[string]any{"amount": 10, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", pkg)
	projects := make([]string, 6)
	for i := range projects {
		projects[i] = uuid.NewString()
	}
	var ids []string
	for i := range 24 {
		id := api.purchaseProject(t, tok, pkg["id"].(string), projects[i%len(projects)], projects[(i+1+i%4)%len(projects)])
		ids = append(ids, id)
		if i%4 == 1 {
			code, body := api.do(t, http.MethodPost, "/api/developers/v1/promotions/"+id+"/cancel", tok, map[string]any{"reason": "test"})
			require.Equal(t, http.StatusOK, code, "%v", body)
		}
	}
	_, err := db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'
		WHERE id = ANY($1::uuid[]) AND status = 'Active'`, "{"+strings.Join([]string{ids[0], ids[6], ids[11]}, ",")+"}")
	require.NoError(t, err)
	code, stderr, res := expireOnce(t, db, "100")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 3, res.Expired)
	want := queryStrings(t, db, boostFromPurchases)
	testbed.Eventually(t, func() error {
		if got := queryStrings(t, db, boostProjected); fmt.Sprint(got) != fmt.Sprint(want) || !appliedEverything(t, db) {
			return fmt.Errorf("projection\n%v\ndiffers from the database\n%v", got, want)
		}
		return nil
	})
	code, _ = consumer.stop(t)
	require.Equal(t, 0, code)

	// Empty the projection and its consumer group; delete the topic's records.
	for _, stmt := range []string{
		`DELETE FROM boost.purchase_targets`, `DELETE FROM boost.target_boosts`,
		`DELETE FROM consumer.inbox WHERE consumer = 'boost'`, `DELETE FROM consumer.aggregate_versions WHERE consumer = 'boost'`,
	} {
		_, err := db.SQL.Exec(stmt)
		require.NoError(t, err)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer client.Close()
	adm := kadm.NewClient(client)
	kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = adm.DeleteGroup(kctx, "boost")
	require.NoError(t, err)
	ends, err := adm.ListEndOffsets(kctx, contract.Topic)
	require.NoError(t, err)
	deleted, err := adm.DeleteRecords(kctx, ends.Offsets())
	require.NoError(t, err)
	require.NoError(t, deleted.Error())
	starts, err := adm.ListStartOffsets(kctx, contract.Topic)
	require.NoError(t, err)
	starts.Each(func(o kadm.ListedOffset) {
		require.Equal(t, ends[o.Topic][o.Partition].Offset, o.Offset, "partition %d holds no earlier record", o.Partition)
	})

	out, stderr, code := run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "promotion", "snapshot")
	require.Equal(t, 0, code, stderr)
	snap := parseSnapshotResult(t, out)
	active := countRows(t, db, `SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Active'`)
	require.Equal(t, active, snap.Events)

	startServer(t, serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION=on"), "serve")
	testbed.Eventually(t, func() error {
		if got := queryStrings(t, db, boostProjected); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("rebuilt projection\n%v\ndiffers from the database\n%v", got, want)
		}
		return nil
	})
	require.Equal(t, active, countRows(t, db, `SELECT count(*) FROM consumer.inbox WHERE consumer = 'boost'`),
		"rebuilt from the snapshot's records alone")
}

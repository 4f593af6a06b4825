package runbooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pinmarket/pin/platform/testbed"
)

const (
	topic       = "pin.promotion.purchase-changed.v1"
	outboxTable = `outbox."pin_promotion_purchase_changed_v1"`
	jwtSecret   = "runbook-test-secret-0123456789abcdef"
)

// world is what one block runs against: its own database, the variables
// its shell sees (BASE, BROKER, PIN_KAFKA_BROKERS), and the values of the
// runbook's placeholders (<purchase_id>, <id>, …).
type world struct {
	db      *testbed.Database
	brokers []string
	env     map[string]string
	values  map[string]string
	// exports are the `export` lines of the state's running `pin dev`: a
	// block runs after them, as in the shell they were pasted into, and
	// without the env a fixture set by hand.
	exports []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return &world{db: testbed.NewDatabase(t), env: map[string]string{}, values: map[string]string{}}
}

// fixture puts a world into the state a runbook section describes.
type fixture struct {
	describe string
	build    func(t *testing.T, w *world)
}

// states are the fixtures an annotation's state= names; a failure for a
// block without one, or naming none of them, lists them with what they hold.
var states = map[string]fixture{
	"migrated": {"a migrated database, nothing in it", func(*testing.T, *world) {}},
	"serving": {"a `pin dev` running (BASE) with its relay active, on a broker (BROKER)", func(t *testing.T, w *world) {
		serving(t, w)
	}},
	"active": {"two Active purchases of one tenant <tenant_id> (<purchase_id> the first), their events on the broker (BROKER); " +
		"no instance running", func(t *testing.T, w *world) {
		purchases(t, w, 2, 1)
	}},
	"snapshot-stopped": {"state active and a snapshot <snapshot_id> of the Project purchases stored but stopped before its " +
		"first batch (what a SIGKILL right after its start leaves)", func(t *testing.T, w *world) {
		purchases(t, w, 2, 1)
		w.values["snapshot_id"] = uuid.NewString()
		sqlExec(t, w, `INSERT INTO promotion.snapshot_runs (id, target_kind, include_ended, started_at, updated_at)
			VALUES ($1, 'Project', false, now(), now())`, w.values["snapshot_id"])
	}},
	"due": {"three Active purchases past their end (<purchase_id> the first), no instance running", func(t *testing.T, w *world) {
		due(t, w, 3, 1)
	}},
	"locked": {"state due, and another session holding one of the purchases FOR UPDATE in an open transaction", locked},
	"backlog": {"state due after one `pin expire-promotions --once`: the expiry events wait in the outbox, no relay runs", func(t *testing.T, w *world) {
		due(t, w, 3, 1)
		pin(t, w, "expire-promotions", "--once")
	}},
	"poison": {"a due purchase <purchase_id> whose targets <target_id_1> and <target_id_2> were deleted, remembered as poison " +
		"by one cycle; its Active event is on the broker (BROKER) and in the outbox", func(t *testing.T, w *world) {
		poison(t, w)
	}},
	"poison-repaired": {"state poison with the purchase's targets put back", func(t *testing.T, w *world) {
		poisonRepaired(t, w)
	}},
	"poison-expired": {"state poison-repaired after one more cycle: <purchase_id> is Expired", func(t *testing.T, w *world) {
		poisonRepaired(t, w)
		pin(t, w, "expire-promotions", "--once")
	}},
	"outbox-sent": {"state serving with one purchase whose event the relay sent: <message_id>, <purchase_id>", func(t *testing.T, w *world) {
		outboxSent(t, w)
	}},
	"outbox-dead-letter-keyless": {"state outbox-sent, and a copy of the event without its key, dead-lettered by the relay: <id>, <message_id>",
		func(t *testing.T, w *world) { outboxDeadLetterKeyless(t, w) }},
	"outbox-dead-letter": {"state outbox-dead-letter-keyless with the key put back: a replayable dead letter <id>", func(t *testing.T, w *world) {
		outboxDeadLetter(t, w)
	}},
	"outbox-replayed": {"state outbox-dead-letter after its replay, sent again by the relay: <message_id>", func(t *testing.T, w *world) {
		outboxDeadLetter(t, w)
		pin(t, w, "outbox", "dead-letters", "replay", w.values["id"])
		waitNoBacklog(t, w)
	}},
	"consumer-dead-letter": {"a dead letter <id> of the boost projection, whose cause (a refusing trigger) is gone, of the record " +
		"<message_id> at <partition>/<offset> of the broker (BROKER); no instance running", consumerDeadLetter},
	"projection": {"the boost projection applied a purchase (boost tables, inbox and versions have rows); no instance running", func(t *testing.T, w *world) {
		in := startDev(t, w)
		tok := bearer(t)
		in.purchase(t, tok, in.packageID(t, tok), uuid.NewString())
		waitRows(t, w, `SELECT count(*) FROM boost.target_boosts`)
		in.stop(t)
	}},
	"kafka-no-topic": {"a three-broker cluster without the topic (BROKER, PIN_KAFKA_BROKERS)", func(t *testing.T, w *world) {
		c, err := kfake.NewCluster(kfake.NumBrokers(3))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		w.setBrokers(c.ListenAddrs())
	}},
}

// broker starts an in-process broker with the topic, once per world.
func (w *world) broker(t *testing.T) []string {
	t.Helper()
	if w.brokers == nil {
		w.setBrokers(testbed.NewKafka(t, topic))
	}
	return w.brokers
}

func (w *world) setBrokers(brokers []string) {
	w.brokers = brokers
	w.env["BROKER"] = brokers[0]
	w.env["PIN_KAFKA_BROKERS"] = strings.Join(brokers, ",")
}

// serving starts `pin dev` on the world's database and broker and waits
// until its relay holds the lead and its topic check has run.
func serving(t *testing.T, w *world) *instance {
	t.Helper()
	in := startDev(t, w)
	// Ready is no promise that the banner has come through the pipe yet.
	testbed.Eventually(t, func() error {
		w.exports = nil
		for _, line := range strings.Split(in.out.String(), "\n") {
			if strings.HasPrefix(line, "  export ") {
				w.exports = append(w.exports, strings.TrimSpace(line))
			}
		}
		if len(w.exports) == 0 || !strings.Contains(in.out.String(), "kcat -C") {
			return fmt.Errorf("no whole banner with export lines yet:\n%s", in.out.String())
		}
		return nil
	})
	w.env = map[string]string{}
	testbed.Eventually(t, func() error {
		_, metrics := testbed.Get(t, in.base+"/metrics")
		for _, want := range []string{`pin_outbox_relay_active{topic="` + topic + `"} 1`, `pin_kafka_topic_partitions{`} {
			if !strings.Contains(metrics, want) {
				return fmt.Errorf("no %s in /metrics yet", want)
			}
		}
		return nil
	})
	return in
}

// purchases makes n Active purchases of project-boost-week with the given
// number of project targets each through a `pin dev`, waits until the relay
// sent their events, and stops it. It returns the ids and their targets.
func purchases(t *testing.T, w *world, n, targets int) (ids []string, targetIDs [][]string) {
	t.Helper()
	in := startDev(t, w)
	tenant := uuid.NewString()
	tok := tenantToken(t, tenant)
	pkg := in.packageID(t, tok)
	for range n {
		projects := make([]string, targets)
		for i := range projects {
			projects[i] = uuid.NewString()
		}
		ids = append(ids, in.purchase(t, tok, pkg, projects...))
		targetIDs = append(targetIDs, projects)
	}
	waitNoBacklog(t, w)
	in.stop(t)
	w.values["purchase_id"], w.values["tenant_id"] = ids[0], tenant
	return ids, targetIDs
}

// due makes n purchases and moves them past their end with `pin dev
// make-due`, the development tool for it.
func due(t *testing.T, w *world, n, targets int) (ids []string, targetIDs [][]string) {
	t.Helper()
	ids, targetIDs = purchases(t, w, n, targets)
	for _, id := range ids {
		pin(t, w, "dev", "make-due", id)
	}
	return ids, targetIDs
}

func locked(t *testing.T, w *world) {
	ids, _ := due(t, w, 3, 1)
	ctx := context.Background()
	conn, err := w.db.SQL.Conn(ctx)
	require.NoError(t, err)
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = tx.Rollback()
		_ = conn.Close()
	})
	_, err = tx.ExecContext(ctx, `SELECT id FROM promotion.promotion_purchases WHERE id = $1 FOR UPDATE`, ids[0])
	require.NoError(t, err)
}

// poison deletes the targets of a due purchase, the usual poison item, and
// runs one cycle, which remembers it.
func poison(t *testing.T, w *world) []string {
	t.Helper()
	ids, targetIDs := due(t, w, 1, 2)
	sqlExec(t, w, `DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = $1`, ids[0])
	out := pin(t, w, "expire-promotions", "--once")
	require.Contains(t, out, `"failed":1`, "the purchase is poison")
	w.values["target_id_1"], w.values["target_id_2"] = targetIDs[0][0], targetIDs[0][1]
	return ids
}

func poisonRepaired(t *testing.T, w *world) {
	t.Helper()
	ids := poison(t, w)
	for i, target := range []string{w.values["target_id_1"], w.values["target_id_2"]} {
		sqlExec(t, w, `INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
			VALUES ($1, 'Project', $2, $3)`, ids[0], target, i)
	}
}

func outboxSent(t *testing.T, w *world) {
	t.Helper()
	in := serving(t, w)
	tok := bearer(t)
	id := in.purchase(t, tok, in.packageID(t, tok), uuid.NewString())
	waitNoBacklog(t, w)
	w.values["purchase_id"] = id
	w.values["message_id"] = queryString(t, w, `SELECT uuid FROM `+outboxTable+` WHERE metadata->>'partition_key' = $1`, id)
}

// outboxDeadLetterKeyless writes a copy of a sent event without its Kafka
// key, as a hand-written row could be; the relay dead-letters it.
func outboxDeadLetterKeyless(t *testing.T, w *world) {
	t.Helper()
	outboxSent(t, w)
	sqlExec(t, w, `INSERT INTO `+outboxTable+` (uuid, payload, metadata)
		SELECT uuid, payload, (metadata::jsonb - 'partition_key')::json FROM `+outboxTable+` WHERE uuid = $1`, w.values["message_id"])
	waitRows(t, w, `SELECT count(*) FROM outbox.dead_letters`)
	w.values["id"] = queryString(t, w, `SELECT id::text FROM outbox.dead_letters WHERE message_id = $1`, w.values["message_id"])
}

func outboxDeadLetter(t *testing.T, w *world) {
	t.Helper()
	outboxDeadLetterKeyless(t, w)
	sqlExec(t, w, `UPDATE outbox.dead_letters
		SET metadata = (metadata::jsonb || jsonb_build_object('partition_key', payload->>'aggregateId'))::json WHERE id = $1`,
		w.values["id"])
}

// consumerDeadLetter makes the boost projection refuse one purchase's
// record with a class 23 error (a fault of the record's data) until it is
// dead-lettered, then removes the cause.
func consumerDeadLetter(t *testing.T, w *world) {
	t.Helper()
	project := uuid.NewString()
	sqlExec(t, w, `CREATE FUNCTION boost.runbook_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.target_id = '`+project+`' THEN RAISE EXCEPTION 'runbook test refuses this target' USING ERRCODE = 'check_violation'; END IF;
	RETURN NEW;
END $$`)
	sqlExec(t, w, `CREATE TRIGGER runbook_refuse BEFORE INSERT ON boost.purchase_targets FOR EACH ROW EXECUTE FUNCTION boost.runbook_refuse()`)
	in := startDev(t, w)
	tok := bearer(t)
	in.purchase(t, tok, in.packageID(t, tok), project)
	waitRows(t, w, `SELECT count(*) FROM consumer.dead_letters WHERE consumer = 'boost'`)
	in.stop(t)
	sqlExec(t, w, `DROP TRIGGER runbook_refuse ON boost.purchase_targets`)
	row := w.db.SQL.QueryRow(`SELECT id::text, kafka_partition::text, kafka_offset::text, headers->>'message_id'
		FROM consumer.dead_letters WHERE consumer = 'boost'`)
	var id, partition, offset, messageID string
	require.NoError(t, row.Scan(&id, &partition, &offset, &messageID))
	w.values["id"], w.values["partition"], w.values["offset"], w.values["message_id"] = id, partition, offset, messageID
}

// waitNoBacklog waits until the relay has sent every event of the outbox.
func waitNoBacklog(t *testing.T, w *world) {
	t.Helper()
	testbed.Eventually(t, func() error {
		if n := count(t, w, `SELECT count(*) FROM `+outboxTable+` WHERE NOT acked`); n > 0 {
			return fmt.Errorf("%d events not sent yet", n)
		}
		return nil
	})
}

// waitRows waits until the count query returns more than 0.
func waitRows(t *testing.T, w *world, query string) {
	t.Helper()
	testbed.Eventually(t, func() error {
		if count(t, w, query) == 0 {
			return errors.New("still nothing: " + query)
		}
		return nil
	})
}

func count(t *testing.T, w *world, query string) int {
	t.Helper()
	n, err := strconv.Atoi(queryString(t, w, query))
	require.NoError(t, err)
	return n
}

func queryString(t *testing.T, w *world, query string, args ...any) string {
	t.Helper()
	var s string
	require.NoError(t, w.db.SQL.QueryRow(query, args...).Scan(&s), query)
	return s
}

func sqlExec(t *testing.T, w *world, query string, args ...any) {
	t.Helper()
	_, err := w.db.SQL.Exec(query, args...)
	require.NoError(t, err, query)
}

// pin runs the binary with PIN_DATABASE_URL and requires exit 0; it
// returns stdout.
func pin(t *testing.T, w *world, args ...string) string {
	t.Helper()
	return runPin(t, []string{"PIN_DATABASE_URL=" + w.db.URL}, args...)
}

func runPin(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pinBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "pin %v: %s", args, stderr.String())
	return stdout.String()
}

// bearer is a bearer token of a new tenant.
func bearer(t *testing.T) string {
	t.Helper()
	return tenantToken(t, uuid.NewString())
}

func tenantToken(t *testing.T, tenant string) string {
	t.Helper()
	return strings.TrimSpace(runPin(t, []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret}, "token", "--tenant", tenant))
}

// instance is a running `pin dev`.
type instance struct {
	base   string
	cmd    *exec.Cmd
	out    *testbed.LogBuffer
	waited chan error
}

// startDev starts `pin dev` on the world's database and broker, on a free
// port, and waits until it is ready.
func startDev(t *testing.T, w *world) *instance {
	t.Helper()
	addr := testbed.FreeAddr(t)
	in := &instance{base: "http://" + addr, out: &testbed.LogBuffer{}, waited: make(chan error, 1)}
	in.cmd = exec.Command(pinBin, "dev")
	in.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PIN_DATABASE_URL=" + w.db.URL,
		"PIN_HTTP_ADDR=" + addr,
		"PIN_KAFKA_BROKERS=" + strings.Join(w.broker(t), ","),
		"PIN_AUTH_JWT_SECRET=" + jwtSecret,
	}
	in.cmd.Stdout, in.cmd.Stderr = in.out, in.out
	require.NoError(t, in.cmd.Start())
	go func() { in.waited <- in.cmd.Wait() }()
	t.Cleanup(func() {
		_ = in.cmd.Process.Kill()
		<-in.waited
		in.waited <- nil
		if t.Failed() {
			t.Logf("pin dev output:\n%s", in.out.String())
		}
	})
	testbed.Eventually(t, func() error {
		select {
		case err := <-in.waited:
			in.waited <- err
			t.Fatalf("pin dev exited: %v\n%s", err, in.out.String())
		default:
		}
		resp, err := http.Get(in.base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	return in
}

// stop ends the instance with SIGTERM and waits for it.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, in.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-in.waited:
		in.waited <- err
		require.NoError(t, err, "pin dev stops cleanly on SIGTERM:\n%s", in.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("pin dev did not stop within 30s of SIGTERM")
	}
}

// api sends one request to the developer API and decodes the answer.
func (in *instance) api(t *testing.T, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, in.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// packageID is the id of the demo package project-boost-week.
func (in *instance) packageID(t *testing.T, tok string) string {
	t.Helper()
	status, pkgs := in.api(t, http.MethodGet, "/api/developers/v1/promotion-packages", tok, nil)
	require.Equal(t, http.StatusOK, status, pkgs)
	for _, item := range pkgs["items"].([]any) {
		if p := item.(map[string]any); p["code"] == "project-boost-week" {
			return p["id"].(string)
		}
	}
	t.Fatal("no package project-boost-week")
	return ""
}

// purchase buys the package for the projects and returns the purchase id.
func (in *instance) purchase(t *testing.T, tok, pkg string, projects ...string) string {
	t.Helper()
	targets := make([]map[string]any, len(projects))
	for i, p := range projects {
		targets[i] = map[string]any{"targetKind": "Project", "targetId": p}
	}
	status, p := in.api(t, http.MethodPost, "/api/developers/v1/promotions", tok, map[string]any{"packageId": pkg, "targets": targets})
	require.Equal(t, http.StatusCreated, status, p)
	return p["id"].(string)
}

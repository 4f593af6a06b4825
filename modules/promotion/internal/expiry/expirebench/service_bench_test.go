package expirebench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// oldPinBinaryEnv names the pin binary of an earlier commit that
// BenchmarkExpireService measures beside today's (scripts/bench.sh builds
// 9a26082's, the last main before the producer-side rework).
const oldPinBinaryEnv = "PIN_BENCH_OLD_PIN_BINARY"

// serviceTotal is the purchases table of BenchmarkExpireService: 20k, of
// which dueBacklog (10k) are due.
const serviceTotal = 20_000

// BenchmarkExpireService measures the expiry as production runs it, today's
// binary against the one named by PIN_BENCH_OLD_PIN_BINARY, in the same run,
// each on a database analyzed after the seed and on one whose targets table
// has no statistics (as after a restore or a pg_upgrade; ADR 0013). Each of
// the four sides has its own database, migrated by its own binary and
// seeded alike, one `pin serve` relaying to its own embedded broker (its
// expiry takes one purchase per 5 minutes at most), and, rotating which
// side goes first:
//
//   - drain: a second `pin serve` with PIN_EXPIRE_MAX_BATCHES_PER_CYCLE=0
//     expires the 10k due purchases in its first cycle; the figure is that
//     cycle's duration_ms / batches from its `cycle completed` line;
//   - once: `pin expire-promotions --once --batch-size 200` on 10k due; the
//     figures are its durationMs and its wall time, process start to exit.
//
// Between runs one UPDATE makes the 10k due again and nothing is vacuumed
// or analyzed, so dead row versions pile up as on a server with autovacuum
// off. Each run waits until its events are on the broker, so the relay
// works beside the drain, not beside the next one.
//
// Reported (medians): drain-ms/batch, old-drain-ms/batch, drain/old,
// once-ms, old-once-ms, once/old, once-wall-ms, old-once-wall-ms, and for
// the targets without statistics nostats-drain-ms/batch,
// old-nostats-drain-ms/batch, nostats-drain/old (against the old binary
// without statistics), nostats-drain/analyzed (today's, against its own
// analyzed figure), nostats-once-ms, old-nostats-once-ms, nostats-once/old.
func BenchmarkExpireService(b *testing.B) {
	oldBin := os.Getenv(oldPinBinaryEnv)
	if oldBin == "" {
		b.Skipf("%s is not set: scripts/bench.sh builds the earlier binary", oldPinBinaryEnv)
	}
	now, old := newServiceSide(b, "new", pinBinary(b), true), newServiceSide(b, "old", oldBin, true)
	nowBare, oldBare := newServiceSide(b, "new-nostats", pinBinary(b), false), newServiceSide(b, "old-nostats", oldBin, false)
	sides := []*serviceSide{now, old, nowBare, oldBare}
	run := func(i int) {
		order := append(slices.Clone(sides[i%len(sides):]), sides[:i%len(sides)]...)
		for _, s := range order {
			s.drains = append(s.drains, s.drain(b))
		}
		for _, s := range order {
			d, wall := s.once(b)
			s.onces, s.onceWalls = append(s.onces, d), append(s.onceWalls, wall)
		}
	}
	run(0) // warm-up: caches, plans, and the first dead row versions
	for _, s := range sides {
		s.drains, s.onces, s.onceWalls = nil, nil, nil
	}
	b.ResetTimer()
	for i := range b.N {
		run(i + 1)
	}
	b.StopTimer()
	// One line: the testing package keeps only the first lines of a
	// benchmark's log.
	var runs strings.Builder
	for _, s := range sides {
		fmt.Fprintf(&runs, "%s: drains %v, onces %v; ", s.name, s.drains, s.onces)
	}
	b.Log(runs.String())
	b.ReportMetric(ms(median(now.drains)), "drain-ms/batch")
	b.ReportMetric(ms(median(old.drains)), "old-drain-ms/batch")
	b.ReportMetric(ms(median(now.drains))/ms(median(old.drains)), "drain/old")
	b.ReportMetric(ms(median(now.onces)), "once-ms")
	b.ReportMetric(ms(median(old.onces)), "old-once-ms")
	b.ReportMetric(ms(median(now.onces))/ms(median(old.onces)), "once/old")
	b.ReportMetric(ms(median(now.onceWalls)), "once-wall-ms")
	b.ReportMetric(ms(median(old.onceWalls)), "old-once-wall-ms")
	b.ReportMetric(ms(median(nowBare.drains)), "nostats-drain-ms/batch")
	b.ReportMetric(ms(median(oldBare.drains)), "old-nostats-drain-ms/batch")
	b.ReportMetric(ms(median(nowBare.drains))/ms(median(oldBare.drains)), "nostats-drain/old")
	b.ReportMetric(ms(median(nowBare.drains))/ms(median(now.drains)), "nostats-drain/analyzed")
	b.ReportMetric(ms(median(nowBare.onces)), "nostats-once-ms")
	b.ReportMetric(ms(median(oldBare.onces)), "old-nostats-once-ms")
	b.ReportMetric(ms(median(nowBare.onces))/ms(median(oldBare.onces)), "nostats-once/old")
}

// serviceSide is one binary with its database, broker and relaying
// `pin serve`.
type serviceSide struct {
	name    string
	bin     string
	f       *fixture
	brokers []string
	// relayLogs are the logs of the side's relaying `pin serve`.
	relayLogs *testbed.LogBuffer
	// events is how many events the side's relay must have sent so far.
	events    int64
	drains    []time.Duration
	onces     []time.Duration
	onceWalls []time.Duration
}

// newServiceSide starts a side; analyzed false removes the targets table's
// statistics after the seed (which analyzes), leaving its size in pg_class
// as a pg_upgrade does.
func newServiceSide(tb testing.TB, name, bin string, analyzed bool) *serviceSide {
	tb.Helper()
	db := testbed.NewEmptyDatabase(tb)
	s := &serviceSide{name: name, bin: bin, brokers: testbed.NewKafka(tb, contract.Topic)}
	out, err := s.command(db.URL, "migrate", "up").CombinedOutput()
	require.NoError(tb, err, "%s: pin migrate up: %s", name, out)
	// The relay starts on an empty table, so its first expiry cycle (at
	// start) finds nothing; its next is 5 minutes later and takes one.
	s.relayLogs, _ = s.start(tb, db.URL, "PIN_EXPIRE_INTERVAL=5m", "PIN_EXPIRE_BATCH_SIZE=1")
	s.f = seedFixture(tb, db, serviceTotal, dueBacklog)
	if !analyzed {
		testbed.ClearStatistics(tb, db.SQL, "promotion.promotion_purchase_targets")
	}
	return s
}

func (s *serviceSide) command(url string, args ...string) *exec.Cmd {
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "PIN_DATABASE_URL="+url, "PIN_KAFKA_BROKERS="+s.brokers[0],
		"PIN_AUTH_JWT_SECRET=benchmark-secret-benchmark-secret-0123456789", "PIN_LOG_LEVEL=info")
	return cmd
}

// start runs `pin serve` with env added, waits until it is ready, and
// returns its logs and a stop that ends it with SIGTERM.
func (s *serviceSide) start(tb testing.TB, url string, env ...string) (logs *testbed.LogBuffer, stop func()) {
	tb.Helper()
	addr := testbed.FreeAddr(tb)
	cmd := s.command(url, "serve")
	cmd.Env = append(append(cmd.Env, "PIN_HTTP_ADDR="+addr), env...)
	logs = &testbed.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(tb, cmd.Start())
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	tb.Cleanup(stop)
	testbed.Eventually(tb, func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return fmt.Errorf("%s: pin serve not ready: %w; logs:\n%s", s.name, err, logs)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: pin serve not ready: %s; logs:\n%s", s.name, resp.Status, logs)
		}
		return nil
	})
	return logs, stop
}

// dueAgain makes the 10k purchases seeded due Active again, version 1, in
// one UPDATE, leaving the old row versions dead in the table.
func (s *serviceSide) dueAgain(tb testing.TB) {
	tb.Helper()
	s.f.exec(tb, `UPDATE promotion.promotion_purchases SET status = 'Active', version = 1
	WHERE ends_at <= $1 AND ends_at > $1 - interval '1 day' AND status <> 'Active'`, s.f.asOf)
	require.Equal(tb, dueBacklog, s.f.countDue(tb))
}

// drain runs a second `pin serve` that drains the due purchases in one
// cycle, and returns that cycle's time per batch.
func (s *serviceSide) drain(tb testing.TB) time.Duration {
	tb.Helper()
	s.dueAgain(tb)
	logs, stop := s.start(tb, s.f.db.URL, "PIN_EXPIRE_INTERVAL=5m", "PIN_EXPIRE_CYCLE_BUDGET=5m",
		"PIN_EXPIRE_MAX_BATCHES_PER_CYCLE=0", fmt.Sprintf("PIN_EXPIRE_BATCH_SIZE=%d", batchSize))
	var cycle struct {
		Expired    int64   `json:"expired"`
		Batches    int64   `json:"batches"`
		DurationMS float64 `json:"duration_ms"`
	}
	// The drainer logs a line per purchase, so only its one line is parsed.
	// A drain compiled by JIT took 24 s on a loaded machine: give it room.
	testbed.EventuallyWithin(tb, 5*time.Minute, func() error {
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, `"msg":"cycle completed"`) && strings.HasSuffix(line, "\n") {
				return json.Unmarshal([]byte(line), &cycle)
			}
		}
		return fmt.Errorf("%s: no cycle completed yet", s.name)
	})
	stop()
	// The relay's own expiry may have taken one purchase meanwhile.
	require.InDelta(tb, dueBacklog, cycle.Expired, 1, "%s: the drain's cycle expired every due purchase", s.name)
	s.awaitRelayed(tb, cycle.Expired)
	return time.Duration(cycle.DurationMS / float64(cycle.Batches) * float64(time.Millisecond))
}

// once runs `pin expire-promotions --once` on the due purchases and
// returns its durationMs and its wall time.
func (s *serviceSide) once(tb testing.TB) (duration, wall time.Duration) {
	tb.Helper()
	s.dueAgain(tb)
	cmd := s.command(s.f.db.URL, "expire-promotions", "--once", "--batch-size", fmt.Sprint(batchSize))
	started := time.Now()
	out, err := cmd.Output()
	wall = time.Since(started)
	require.NoError(tb, err, "%s: pin expire-promotions --once: %s", s.name, out)
	var res struct {
		Expired    int64   `json:"expired"`
		DurationMS float64 `json:"durationMs"`
	}
	require.NoError(tb, json.Unmarshal(out, &res), "%s: --once printed %s", s.name, out)
	require.EqualValues(tb, batchSize, res.Expired, "%s: --once expired one batch", s.name)
	s.awaitRelayed(tb, res.Expired)
	return time.Duration(res.DurationMS * float64(time.Millisecond)), wall
}

// awaitRelayed waits until the side's broker holds n more records than it
// did: the relay has sent the run's events.
func (s *serviceSide) awaitRelayed(tb testing.TB, n int64) {
	tb.Helper()
	s.events += n
	client, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...))
	require.NoError(tb, err)
	defer client.Close()
	admin := kadm.NewClient(client)
	// 9a26082's forwarder takes minutes for 10k events on a loaded machine;
	// the wait is not measured.
	testbed.EventuallyWithin(tb, 5*time.Minute, func() error {
		ends, err := admin.ListEndOffsets(context.Background(), contract.Topic)
		if err != nil {
			return err
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		if sum < s.events {
			return fmt.Errorf("%s: %d of %d events on the broker; the relay's last logs:\n%s", s.name, sum, s.events, tail(s.relayLogs.String(), 3000))
		}
		return nil
	})
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	return s[max(0, len(s)-n):]
}

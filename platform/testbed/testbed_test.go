package testbed_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

func TestNewDatabaseIsFreshAndMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := testbed.NewDatabase(t)
	b := testbed.NewDatabase(t)
	require.NotEqual(t, a.Name, b.Name)

	require.NoError(t, postgres.Ready(ctx, a.SQL), "the clone carries every migration")

	// Writes in one database are invisible in the other.
	_, err := a.SQL.Exec(`CREATE TABLE only_in_a (id int)`)
	require.NoError(t, err)
	var n int
	require.NoError(t, b.SQL.QueryRow(
		`SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n))
	require.Zero(t, n)

	var timeout string
	require.NoError(t, a.SQL.QueryRow(`SHOW idle_in_transaction_session_timeout`).Scan(&timeout))
	require.Equal(t, "30s", timeout)
}

// A declared topic has its outbox table in every database: from the
// template, or made in the clone when declared after the template was.
func TestADeclaredTopicHasItsTable(t *testing.T) {
	t.Parallel()
	hasTable := func(db *testbed.Database, topic string) bool {
		var n int
		require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM pg_class WHERE oid = to_regclass('outbox.' || outbox.topic_table($1))`, topic).Scan(&n))
		return n == 1
	}
	before := testbed.NewDatabase(t)
	require.False(t, hasTable(before, "pin.testbed.declared.v1"))
	testbed.DeclareTopics("pin.testbed.declared.v1")
	require.True(t, hasTable(testbed.NewDatabase(t), "pin.testbed.declared.v1"))
}

func TestNewDatabaseIsDroppedAfterTheTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = testbed.NewDatabase(t).Name
	})
	keeper := testbed.NewDatabase(t)
	var n int
	require.NoError(t, keeper.SQL.QueryRow(
		`SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n))
	require.Zero(t, n, "database %s should be dropped", name)

	// The template is closed to connections, so cloning never races a session.
	require.NoError(t, keeper.SQL.QueryRow(
		`SELECT count(*) FROM pg_database WHERE datname LIKE 'pin_tmpl_%' AND datistemplate AND NOT datallowconn`).Scan(&n))
	require.Positive(t, n)
}

func TestNewKafka(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := testbed.NewKafka(t, "t1", "t2")
	require.Len(t, brokers, 1)

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("t1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()

	topics, err := kadm.NewClient(cl).ListTopics(ctx, "t1", "t2")
	require.NoError(t, err)
	for _, name := range []string{"t1", "t2"} {
		require.NoError(t, topics[name].Err)
		require.Len(t, topics[name].Partitions, testbed.KafkaPartitions)
	}

	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t1", Value: []byte("hi")}).FirstErr())
	fetches := cl.PollFetches(ctx)
	require.NoError(t, fetches.Err())
	require.Equal(t, "hi", string(fetches.Records()[0].Value))
}

// LogBuffer takes lines from concurrent writers whole and reads them back
// as records.
func TestLogBufferRecords(t *testing.T) {
	t.Parallel()
	logs := &testbed.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { logger.Info("written", "i", i) })
	}
	wg.Wait()
	logger.Warn("other")
	require.Len(t, logs.All(t), 21)
	require.Len(t, logs.Records(t, "written"), 20)
	require.Equal(t, "WARN", logs.Records(t, "other")[0]["level"])
}

// Eventually returns as soon as the condition holds, polling in the test's
// goroutine.
func TestEventuallyPollsUntilTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	testbed.Eventually(t, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	require.Equal(t, 3, calls)
}

// runnerFunc is a host.Runner made of a function.
type runnerFunc func(ctx context.Context) error

func (runnerFunc) Name() string                    { return "test-runner" }
func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// StartRunner starts a runner that failed again, as the host does, and
// stop returns once Run has.
func TestStartRunnerRestartsAFailedRunnerAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		var returned atomic.Bool
		stop := testbed.StartRunner(t, runnerFunc(func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				return errors.New("broker not up yet")
			}
			<-ctx.Done()
			time.Sleep(time.Second) // finishing what is in flight
			returned.Store(true)
			return nil
		}))
		time.Sleep(time.Minute)
		require.EqualValues(t, 2, runs.Load(), "started again after its failure, once")
		stop()
		require.True(t, returned.Load(), "stop returned before Run did")
	})
}

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// Eventually gives up after ForwardDeadline with the condition's last error.
func TestEventuallyFailsWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &fatalRecorder{TB: t}
		start := time.Now()
		calls := 0
		testbed.Eventually(rec, func() error {
			calls++
			return fmt.Errorf("attempt %d", calls)
		})
		require.Equal(t, fmt.Sprintf("testbed: still not after %s: attempt %d", testbed.ForwardDeadline, calls), rec.fatal)
		require.GreaterOrEqual(t, time.Since(start), testbed.ForwardDeadline)
	})
}

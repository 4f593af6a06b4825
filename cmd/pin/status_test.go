package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// statusJSON is what `pin status --json` prints, as far as the tests read it.
type statusJSON struct {
	Expiry struct {
		Backlog         int        `json:"backlog"`
		OldestDueEndsAt *time.Time `json:"oldestDueEndsAt"`
		Poison          int        `json:"poison"`
		LastCycle       *struct {
			Cycle    expireOnceResult `json:"cycle"`
			Instance string           `json:"instance"`
			Error    string           `json:"error"`
		} `json:"lastCycle"`
	} `json:"expiry"`
	Outbox []struct {
		Topic   string `json:"topic"`
		Backlog int    `json:"backlog"`
		Leader  *struct {
			ApplicationName string `json:"applicationName"`
		} `json:"leader"`
		DeadLetters int `json:"deadLetters"`
	} `json:"outbox"`
	Consumers []struct {
		Group       string `json:"group"`
		DeadLetters int    `json:"deadLetters"`
		Lag         *int   `json:"lag"`
		LagUnknown  string `json:"lagUnknown"`
	} `json:"consumers"`
}

func readStatus(t *testing.T, env []string) statusJSON {
	t.Helper()
	out, stderr, code := run(t, env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, strings.Count(out, "\n"), "one JSON object: %s", out)
	var s statusJSON
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return s
}

// TestStatusShowsTheModuleOnOneScreen drives `pin status` with only
// PIN_DATABASE_URL through the module's states: empty; two purchases due,
// one of them poison; after a cycle of `pin expire-promotions --once`, its
// run recorded with the instance that ran it; then with `pin dev` running,
// the relay's leader named by its application_name, and with
// PIN_KAFKA_BROKERS the boost consumer's lag.
func TestStatusShowsTheModuleOnOneScreen(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}

	for _, args := range [][]string{{"status", "extra"}, {"status", "--bogus"}} {
		_, stderr, code := run(t, env, args...)
		require.Equal(t, 2, code, "pin %v: %s", args, stderr)
	}
	_, stderr, code := run(t, []string{"PIN_DATABASE_URL=postgres://postgres@127.0.0.1:1/none?sslmode=disable"}, "status")
	require.Equal(t, 1, code, "no database: %s", stderr)

	s := readStatus(t, env)
	require.Zero(t, s.Expiry.Backlog)
	require.Nil(t, s.Expiry.OldestDueEndsAt)
	require.Nil(t, s.Expiry.LastCycle, "no cycle ran on this database yet")
	require.Len(t, s.Outbox, 1+len(testOnlyTopics), "each declared topic")
	require.Equal(t, topic, s.Outbox[0].Topic, "promotion's first: the list's order")
	for _, o := range s.Outbox {
		require.Nil(t, o.Leader, "no relay runs")
	}
	require.Len(t, s.Consumers, 1)
	require.Equal(t, "boost", s.Consumers[0].Group)
	require.Nil(t, s.Consumers[0].Lag)
	require.Equal(t, "PIN_KAFKA_BROKERS is not set", s.Consumers[0].LagUnknown)
	text, stderr, code := run(t, env, "status")
	require.Equal(t, 0, code, stderr)
	for _, says := range []string{"backlog 0 (none due), poison 0", "last cycle: none recorded", "relay leader: NONE",
		"boost: dead letters 0 (discarded 0), lag unknown: PIN_KAFKA_BROKERS is not set"} {
		require.Contains(t, text, says)
	}

	ids := purchasesThroughAPI(t, db, 2)
	_, err := db.SQL.Exec(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = $1`, ids[0])
	require.NoError(t, err)
	_, err = db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'
		WHERE id = ANY($1::uuid[])`, "{"+strings.Join(ids, ",")+"}")
	require.NoError(t, err)
	s = readStatus(t, env)
	require.Equal(t, 2, s.Expiry.Backlog)
	require.NotNil(t, s.Expiry.OldestDueEndsAt)
	require.Less(t, *s.Expiry.OldestDueEndsAt, time.Now())
	require.NotNil(t, s.Expiry.LastCycle, "pin dev ran a cycle at start")
	require.Regexp(t, `^pin/.+-[0-9]+/serve$`, s.Expiry.LastCycle.Instance)

	code, stderr, res := expireOnce(t, db, "200")
	require.Equal(t, 0, code, stderr)
	s = readStatus(t, env)
	require.Equal(t, 1, s.Expiry.Backlog, "the poison one stays due")
	require.Equal(t, 1, s.Expiry.Poison)
	c := s.Expiry.LastCycle
	require.NotNil(t, c)
	require.Equal(t, res, c.Cycle, "the cycle just run, as --once printed it")
	require.Empty(t, c.Error)
	require.Regexp(t, `^pin/.+-[0-9]+/expire$`, c.Instance)

	_, kafkaAddr := startDevWithBroker(t, db)
	relay := regexp.MustCompile(`^pin/.+-[0-9]+/relay$`)
	testbed.Eventually(t, func() error {
		s = readStatus(t, env)
		if l := s.Outbox[0].Leader; l == nil || !relay.MatchString(l.ApplicationName) {
			return fmt.Errorf("relay leader %+v", l)
		}
		return nil
	})
	text, stderr, code = run(t, env, "status")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `relay leader: pin/.+-[0-9]+/relay \(pid [0-9]+`, text)

	withBroker := append(env, "PIN_KAFKA_BROKERS="+kafkaAddr)
	testbed.Eventually(t, func() error {
		s = readStatus(t, withBroker)
		if g := s.Consumers[0]; g.Lag == nil || *g.Lag != 0 {
			return errors.New("boost lag " + fmt.Sprint(g.Lag) + " " + g.LagUnknown)
		}
		return nil
	})
}

// TestOperatorCommandsSayNoWritableDatabase: every host of the URL is a
// server that is read-only (a standby, a demoted primary) and the URL asks
// for a writable one (target_session_attrs=read-write). `pin status` and
// the operator commands exit 1 saying there is no writable database and
// naming each host tried, not with pgx's block of one line per host.
func TestOperatorCommandsSayNoWritableDatabase(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	a, b := testbed.StartDatabaseHost(t), testbed.StartDatabaseHost(t)
	a.SetReadOnly(true)
	b.SetReadOnly(true)
	env := []string{"PIN_DATABASE_URL=" + testbed.HostListURL(t, db.URL, []string{a.Addr(), b.Addr()},
		url.Values{"target_session_attrs": {"read-write"}})}
	for _, args := range [][]string{
		{"status"},
		{"status", "--json"},
		{"outbox", "dead-letters", "list"},
		{"promotion", "poison", "list"},
	} {
		_, stderr, code := run(t, env, args...)
		require.Equal(t, 1, code, "pin %v: %s", args, stderr)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "pin %v: one line: %s", args, stderr)
		require.Contains(t, stderr, "no writable database: tried "+a.Addr(), "pin %v", args)
		require.Contains(t, stderr, b.Addr()+" (127.0.0.1): read-only", "pin %v", args)
		require.NotContains(t, stderr, "failed to connect", "pin %v", args)
	}
}

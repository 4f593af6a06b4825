package main_test

// Tests of pin as production runs it: a Kafka cluster that wants SASL and
// TLS (and ACLs), a topic provisioned by `pin kafka create-topics`, and a
// production build without the test broker.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestServePublishesThroughSCRAMOverTLSWithAWriteOnlyUser runs `pin serve`
// against a broker demanding SCRAM-SHA-512 over TLS with ACLs on, as a user
// granted only WRITE on the topic. With a wrong password the event stays in
// the outbox (counted, logged) while the API answers; restarted with the
// right one, pin delivers it. No output ever carries a password.
func TestServePublishesThroughSCRAMOverTLSWithAWriteOnlyUser(t *testing.T) {
	t.Parallel()
	const rightPassword, wrongPassword = "right-pass-7f3a9c", "wrong-pass-2b8e41"
	ca := testbed.NewCA(t)
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:  ca.ServerTLS(t, nil),
		ACLs: true,
		Users: []testbed.KafkaUser{
			{Mechanism: "SCRAM-SHA-512", Name: "reader", Password: "reader-pass", Superuser: true},
			{Mechanism: "SCRAM-SHA-512", Name: "pin", Password: rightPassword, Allow: []kmsg.ACLOperation{kmsg.ACLOperationWrite}},
		},
	}, topic)
	db := testbed.NewDatabase(t)
	passwordFile := filepath.Join(t.TempDir(), "kafka-password")
	require.NoError(t, os.WriteFile(passwordFile, []byte(wrongPassword+"\n"), 0o600))
	env := func() []string {
		return serveEnv(t, db, brokers,
			"PIN_LOG_LEVEL=debug", // the most the log ever says, still no password
			"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
			"PIN_KAFKA_SASL_USERNAME=pin",
			"PIN_KAFKA_SASL_PASSWORD_FILE="+passwordFile,
			"PIN_KAFKA_TLS=true",
			"PIN_KAFKA_TLS_CA_FILE="+ca.File,
		)
	}
	reader := []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "reader", Pass: "reader-pass"}.AsSha512Mechanism()),
	}
	requireHeldUntilFixed(t, env, reader, brokers, func() {
		require.NoError(t, os.WriteFile(passwordFile, []byte(rightPassword+"\n"), 0o600))
	}, rightPassword, wrongPassword)
}

// TestServePublishesThroughMutualTLS is the same with a broker that
// authenticates clients by certificate: one from an untrusted CA holds the
// event in the outbox, the right one delivers it.
func TestServePublishesThroughMutualTLS(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	_, trusted := ca.Issue(t, "pin")
	_, untrusted := testbed.NewCA(t).Issue(t, "pin")
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{TLS: ca.ServerTLS(t, ca.Pool)}, topic)
	db := testbed.NewDatabase(t)
	client := untrusted
	env := func() []string {
		return serveEnv(t, db, brokers,
			"PIN_KAFKA_TLS=true",
			"PIN_KAFKA_TLS_CA_FILE="+ca.File,
			"PIN_KAFKA_TLS_CERT_FILE="+client.Cert,
			"PIN_KAFKA_TLS_KEY_FILE="+client.Key,
			"PIN_KAFKA_TLS_SERVER_NAME=localhost",
		)
	}
	readerPair, _ := ca.Issue(t, "reader")
	reader := []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{readerPair}, MinVersion: tls.VersionTLS12})}
	requireHeldUntilFixed(t, env, reader, brokers, func() { client = trusted })
}

// requireHeldUntilFixed sells a purchase through a `pin serve` started with
// env() (a broken Kafka setting), shows its event held in the outbox while
// the API answers, stops it, calls fix, restarts it and waits for the event
// on the topic. secrets must never appear in pin's output.
func requireHeldUntilFixed(t *testing.T, env func() []string, reader []kgo.Opt, brokers []string, fix func(), secrets ...string) {
	t.Helper()
	broken := startServer(t, env(), "serve")
	purchaseID, tenant := sellOne(t, broken)
	testbed.Eventually(t, func() error {
		if n := metricValue(t, broken, "pin_outbox_backlog_messages"); n != 1 {
			return fmt.Errorf("the held event is not counted in the backlog: %v", n)
		}
		return nil
	})
	testbed.Eventually(t, func() error {
		if !regexp.MustCompile(`"msg":"outbox [a-z]+ paused"`).MatchString(broken.out.String()) {
			return errors.New("the held event is not logged")
		}
		return nil
	})
	testbed.Eventually(t, func() error {
		if metricValue(t, broken, "pin_outbox_publish_errors_total") == 0 {
			return errors.New("no failed publish attempt is counted")
		}
		return nil
	})
	require.Zero(t, metricValue(t, broken, "pin_outbox_published_total"), "nothing reached Kafka")
	code, body := broken.do(t, http.MethodGet, "/api/developers/v1/promotions/"+purchaseID, token(t, tenant), nil)
	require.Equal(t, http.StatusOK, code, "the API keeps answering: %v", body)
	exit, _ := broken.stop(t)
	require.Equal(t, 0, exit)
	requireNoSecret(t, broken.out.String(), secrets...)

	fix()
	fixed := startServer(t, env(), "serve")
	require.Equal(t, []string{"Active"}, statusesOnTopic(t, brokers, reader, purchaseID, 1), "the held event is delivered")
	testbed.Eventually(t, func() error {
		if n := metricValue(t, fixed, `pin_kafka_topic_partitions{topic="`+topic+`"}`); n != 3 {
			return fmt.Errorf("the topic check with the same user sees %v partitions", n)
		}
		return nil
	})
	exit, _ = fixed.stop(t)
	require.Equal(t, 0, exit)
	requireNoSecret(t, fixed.out.String(), secrets...)
}

// serveEnv is the environment of a `pin serve` on db and brokers, on a
// free HTTP port, with the Kafka settings given.
func serveEnv(t *testing.T, db *testbed.Database, brokers []string, kafka ...string) []string {
	t.Helper()
	return append([]string{
		"PIN_DATABASE_URL=" + db.URL,
		"PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
		"PIN_AUTH_JWT_SECRET=" + jwtSecret,
		"PIN_KAFKA_BROKERS=" + strings.Join(brokers, ","),
	}, kafka...)
}

func requireNoSecret(t *testing.T, output string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, output, s, "a secret in pin's output")
	}
}

// sellOne creates a package as an admin and buys it as a new tenant; it
// returns the purchase id and the tenant.
func sellOne(t *testing.T, s *server) (string, uuid.UUID) {
	t.Helper()
	admin := token(t, uuid.New(), "admin")
	code, pkg := s.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", admin, map[string]any{
		"code": "boost-" + strconv.FormatInt(time.Now().UnixNano(), 36), "name": "Boost", "kind": "ProjectBoost",
		"durationDays": 7, "boostWeight": 10, "price": map[string]any{"amount": 100, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", pkg)
	tenant := uuid.New()
	code, purchase := s.do(t, http.MethodPost, "/api/developers/v1/promotions", token(t, tenant), map[string]any{
		"packageId": pkg["id"],
		"targets":   []map[string]any{{"targetKind": "Project", "targetId": uuid.NewString()}},
	})
	require.Equal(t, http.StatusCreated, code, "%v", purchase)
	return purchase["id"].(string), tenant
}

// metricValue scrapes s and sums the samples of series (a family name, or
// a name with its labels as printed).
func metricValue(t *testing.T, s *server, series string) float64 {
	t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if family, _, _ := strings.Cut(name, "{"); name == series || family == series {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(t, err, line)
			sum += v
		}
	}
	return sum
}

// purchaseRecords reads the topic from the start until n records of the
// purchase arrived (or testbed.ForwardDeadline passed) and returns them in order.
func purchaseRecords(t *testing.T, brokers []string, opts []kgo.Opt, purchaseID string, n int) []*kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	require.NoError(t, err)
	defer client.Close()
	var records []*kgo.Record
	deadline := time.Now().Add(testbed.ForwardDeadline)
	for len(records) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == purchaseID {
				records = append(records, r)
			}
		})
	}
	return records
}

// statusesOnTopic returns the payload statuses of purchaseRecords.
func statusesOnTopic(t *testing.T, brokers []string, opts []kgo.Opt, purchaseID string, n int) []string {
	t.Helper()
	var statuses []string
	for _, r := range purchaseRecords(t, brokers, opts, purchaseID, n) {
		var env struct {
			Payload struct {
				Status string `json:"status"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(r.Value, &env))
		statuses = append(statuses, env.Payload.Status)
	}
	return statuses
}

// TestKafkaCreateTopics provisions the topic on a secured broker as an
// operator would: the first run creates it, the second finds it.
func TestKafkaCreateTopics(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	brokers := testbed.NewSecureKafka(t, testbed.KafkaSecurity{
		TLS:   ca.ServerTLS(t, nil),
		ACLs:  true,
		Users: []testbed.KafkaUser{{Mechanism: "SCRAM-SHA-256", Name: "ops", Password: "ops-pass-91d2", Superuser: true}},
	})
	env := []string{
		"PIN_KAFKA_BROKERS=" + strings.Join(brokers, ","),
		"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-256",
		"PIN_KAFKA_SASL_USERNAME=ops",
		"PIN_KAFKA_SASL_PASSWORD=ops-pass-91d2",
		"PIN_KAFKA_TLS=true",
		"PIN_KAFKA_TLS_CA_FILE=" + ca.File,
	}
	var created, found string
	for _, tp := range append([]string{topic}, testOnlyTopics...) {
		created += "created " + tp + ": 3 partitions, replication factor 1, retention 168h0m0s\n"
		found += "found " + tp + ": 3 partitions (needs 3), left as it is\n"
	}
	out, stderr, code := run(t, env, "kafka", "create-topics", "--replication-factor", "1")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, created, out, "every declared topic, in the list's order")
	out, stderr, code = run(t, env, "kafka", "create-topics", "--replication-factor", "1")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, found, out)
	requireNoSecret(t, out+stderr, "ops-pass-91d2")

	_, stderr, code = run(t, append(env[:len(env):len(env)], "PIN_KAFKA_SASL_PASSWORD=wrong"), "kafka", "create-topics")
	require.Equal(t, 1, code, "a refused login is an infrastructure error")
	require.Len(t, strings.Split(strings.TrimSpace(stderr), "\n"), 1, stderr)
}

// TestProductionBuildCarriesNoTestBroker builds pin as the Dockerfile does:
// franz-go's kfake and the development step (database marker, seeding,
// banner) are not linked, `pin dev` says how to get it, and `pin version`
// reports the linked version and commit.
func TestProductionBuildCarriesNoTestBroker(t *testing.T) {
	t.Parallel()
	const kfake = "github.com/twmb/franz-go/pkg/kfake"
	deps := func(tags ...string) string {
		out, err := exec.Command("go", append(append([]string{"list", "-deps"}, tags...), ".")...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	require.Contains(t, deps(), kfake, "the default build has pin dev")
	require.NotContains(t, deps("-tags", "production"), kfake)

	bin := filepath.Join(t.TempDir(), "pin")
	const linked = "-X github.com/pinmarket/pin/platform/buildinfo.linkedVersion=v9.8.7 -X github.com/pinmarket/pin/platform/buildinfo.linkedRevision=0123abcd"
	out, err := exec.Command("go", "build", "-tags", "production", "-ldflags", linked, "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "pin v9.8.7 (revision 0123abcd, "+runtime.Version()+")\n", string(out))
	mods, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	require.NoError(t, err, "%s", mods)
	require.NotContains(t, string(mods), "franz-go/pkg/kfake")
	require.NotContains(t, string(mods), "go.opentelemetry.io/contrib/propagators/aws", "the deprecated X-Ray propagator is not linked")
	syms, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	require.NoError(t, err, "%s", syms)
	for _, step := range []string{"main.devServe", "main.printDevHowTo", "main.markDevDatabase", "main.makeDue"} {
		require.NotContains(t, string(syms), " T "+step+"\n", "the development step is left out whole")
	}
	cmd := exec.Command(bin, "dev")
	cmd.Env = []string{}
	stderr, _ := cmd.CombinedOutput()
	require.Equal(t, 2, cmd.ProcessState.ExitCode())
	require.Contains(t, string(stderr), "go build ./cmd/pin")
	for _, args := range [][]string{{"dev", "--help"}, {"dev", "make-due", "-h"}} {
		help := exec.Command(bin, args...)
		help.Env = []string{}
		out, _ := help.CombinedOutput()
		require.Equal(t, 0, help.ProcessState.ExitCode(), "pin %v in the production build: %s", args, out)
		require.Contains(t, string(out), "go build ./cmd/pin")
	}
}

package archrules_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/archrules"
)

const module = "github.com/pinmarket/pin"

// TestProjectKeepsItsBoundaries is the architecture test of this repository.
func TestProjectKeepsItsBoundaries(t *testing.T) {
	t.Parallel()
	// The contract is a Go module of its own (ADR 0022), which ./... does
	// not descend into: named by its path, it is loaded through the replace.
	g, err := archrules.Load("../..", "./...", module+"/modules/promotion/contract/...")
	require.NoError(t, err)
	require.Contains(t, g, module+"/modules/promotion/internal/domain", "the loader must see the domain package")
	require.Contains(t, g, module+"/platform/host")
	require.Contains(t, g, module+"/modules/promotion/contract", "the contract rule must see the contract")
	require.Contains(t, g, module+"/modules/promotion/internal/promotiontest", "the test-support rule must see promotiontest")
	require.Contains(t, g, module+"/modules/promotion/contract/contracttest", "the contract rule must see the kit")
	require.Contains(t, g, module+"/platform/outbox/relay", "the outbox rules must see the relay")
	require.Contains(t, g, module+"/platform/outbox/deadletters", "the outbox rules must see the dead-letter room")
	require.Contains(t, g, module+"/platform/consumer/deadletters", "the consumer rules must see the dead-letter room")
	require.Contains(t, g, module+"/platform/consumer/inbox", "the consumer rules must see the inbox")
	require.Contains(t, g, module+"/platform/deadletter", "the dead-letter rule must see the shared administration")
	require.Empty(t, archrules.Check(g, archrules.Rules(module)...))

	tests, err := archrules.LoadTests("../..", "./...")
	require.NoError(t, err)
	require.Contains(t, tests, module+"/modules/boost", "the test rules must see the modules' tests")
	require.Empty(t, archrules.Check(tests, archrules.TestRules(module)...),
		"a module's test uses what the module may use, or test support (platform/outbox/outboxtest)")
}

// TestTestRulesCatchAPlantedTestFile runs the test-file rules over a planted
// repository (testdata/tests) whose code keeps every rule and whose test
// files break them: the graph of code alone shows nothing, the test files'
// graph shows each planted import once, and the relay reached through the
// outbox's test support is allowed.
func TestTestRulesCatchAPlantedTestFile(t *testing.T) {
	t.Parallel()
	const fake = "example.com/fake"
	code, err := archrules.Load("testdata/tests", "./...")
	require.NoError(t, err)
	require.Contains(t, code, fake+"/modules/billing")
	require.Empty(t, archrules.Check(code, archrules.Rules(fake)...), "the code alone keeps every rule")

	tests, err := archrules.LoadTests("testdata/tests", "./...")
	require.NoError(t, err)
	var got []string
	for _, v := range archrules.Check(tests, archrules.TestRules(fake)...) {
		got = append(got, v.String())
	}
	require.Equal(t, []string{
		"modules depend only on the consumer kit (test files: and its test support): " + fake + "/modules/billing/internal/ports depends on " + fake + "/platform/consumer/deadletters",
		"modules depend only on the outbox's write API (test files: and its test support): " + fake + "/modules/billing depends on " + fake + "/platform/outbox/relay",
		"platform imports no module: " + fake + "/platform/host depends on " + fake + "/modules/billing",
	}, got)
}

// TestEachRuleCatchesAPlantedViolation builds a throw-away Go module that
// breaks every rule once and checks that each rule reports exactly its own
// violation: a rule that could never fail would fail this test.
func TestEachRuleCatchesAPlantedViolation(t *testing.T) {
	t.Parallel()
	const fake = "example.com/fake"
	dir := t.TempDir()
	files := map[string]string{
		// gorm.io/gorm and example.com/money(x) are replaced by local stubs,
		// so the imports have real-looking paths without a download;
		// moneyx shares money's prefix but is not an allowed library.
		"go.mod": "module " + fake + "\n\ngo 1.26\n\nrequire (\n\tgorm.io/gorm v1.0.0\n\tgithub.com/prometheus/client_golang v1.0.0\n\tgo.opentelemetry.io/otel v1.0.0\n\texample.com/money v1.0.0\n\texample.com/moneyx v1.0.0\n)\n\n" +
			"replace gorm.io/gorm => ./stub/gorm\n\nreplace github.com/prometheus/client_golang => ./stub/prometheus\n\nreplace go.opentelemetry.io/otel => ./stub/otel\n\nreplace example.com/money => ./stub/money\n\nreplace example.com/moneyx => ./stub/moneyx\n",
		"stub/moneyx/go.mod":                                        "module example.com/moneyx\n\ngo 1.26\n",
		"stub/moneyx/moneyx.go":                                     "package moneyx\n",
		"stub/gorm/go.mod":                                          "module gorm.io/gorm\n\ngo 1.26\n",
		"stub/gorm/gorm.go":                                         "package gorm\n",
		"stub/money/go.mod":                                         "module example.com/money\n\ngo 1.26\n",
		"stub/money/money.go":                                       "package money\n",
		"stub/prometheus/go.mod":                                    "module github.com/prometheus/client_golang\n\ngo 1.26\n",
		"stub/prometheus/prometheus/prometheus.go":                  "package prometheus\n",
		"stub/otel/go.mod":                                          "module go.opentelemetry.io/otel\n\ngo 1.26\n",
		"stub/otel/trace/trace.go":                                  "package trace\n",
		"modules/billing/contract/contract.go":                      "package contract\n",
		"modules/billing/ledger/ledger.go":                          "package ledger\n",
		"modules/promotion/contract/contract.go":                    "package contract\n\nimport _ \"" + fake + "/modules/promotion/internal/app\"\n",
		"modules/promotion/contract/gorm.go":                        "package contract\n\nimport _ \"gorm.io/gorm\"\n",
		"modules/promotion/contract/lookalike.go":                   "package contract\n\nimport _ \"example.com/moneyx\"\n",
		"modules/promotion/contract/fields.go":                      "package contract\n\nimport (\n\t_ \"example.com/money\"\n\t_ \"strings\"\n\t_ \"" + fake + "/modules/promotion/contract/v2\"\n)\n",
		"modules/promotion/contract/v2/v2.go":                       "package v2\n",
		"modules/promotion/internal/app/app.go":                     "package app\n",
		"modules/promotion/internal/app/report/report.go":           "package report\n\nimport _ \"go.opentelemetry.io/otel/trace\"\n",
		"modules/promotion/internal/expiry/cycle.go":                "package expiry\n\nimport _ \"go.opentelemetry.io/otel/trace\"\n",
		"modules/promotion/internal/expiry/telemetry/telemetry.go":  "package telemetry\n\nimport _ \"github.com/prometheus/client_golang/prometheus\"\n",
		"modules/billing/internal/app/app.go":                       "package app\n\nimport _ \"" + fake + "/modules/billing/internal/metrics\"\n",
		"modules/billing/internal/metrics/metrics.go":               "package metrics\n\nimport _ \"github.com/prometheus/client_golang/prometheus\"\n",
		"modules/promotion/internal/ports/trace.go":                 "package ports\n\nimport _ \"go.opentelemetry.io/otel/trace\"\n",
		"modules/promotion/internal/app/app_test.go":                "package app\n\nimport _ \"" + fake + "/modules/promotion/internal/promotiontest\"\n",
		"modules/promotion/internal/domain/domain.go":               "package domain\n\nimport _ \"gorm.io/gorm\"\n",
		"modules/promotion/internal/ports/ports.go":                 "package ports\n\nimport _ \"" + fake + "/modules/billing/ledger\"\n",
		"modules/promotion/internal/ports/contract.go":              "package ports\n\nimport _ \"" + fake + "/modules/billing/contract\"\n",
		"modules/promotion/internal/adapters/adapters.go":           "package adapters\n\nimport _ \"" + fake + "/modules/promotion/internal/promotiontest\"\n",
		"modules/promotion/internal/promotiontest/promotiontest.go": "package promotiontest\n\nimport _ \"" + fake + "/platform/testbed\"\n",
		"platform/testbed/testbed.go":                               "package testbed\n\nimport _ \"testing\"\n",
		"platform/host/host.go":                                     "package host\n\nimport _ \"" + fake + "/modules/billing/contract\"\n",
		"platform/clean/clean.go":                                   "package clean\n",
		"platform/outbox/outbox.go":                                 "package outbox\n\nimport _ \"" + fake + "/platform/outbox/internal/store\"\n",
		"platform/outbox/internal/store/store.go":                   "package store\n",
		"platform/outbox/relay/relay.go":                            "package relay\n\nimport _ \"" + fake + "/platform/outbox/internal/store\"\n",
		"platform/outbox/deadletters/deadletters.go":                "package deadletters\n",
		"platform/outbox/tracing.go":                                "package outbox\n\nimport _ \"" + fake + "/platform/outbox/deadletters\"\n",
		"modules/billing/internal/adapters/outbox.go":               "package adapters\n\nimport _ \"" + fake + "/platform/outbox\"\n",
		"modules/billing/internal/ports/relay.go":                   "package ports\n\nimport _ \"" + fake + "/platform/outbox/relay\"\n",
		"modules/billing/internal/ports/replay.go":                  "package ports\n\nimport _ \"" + fake + "/platform/consumer/deadletters\"\n",
		"platform/consumer/consumer.go":                             "package consumer\n\nimport _ \"" + fake + "/platform/consumer/deadletters\"\n",
		"platform/consumer/deadletters/deadletters.go":              "package deadletters\n",
		"platform/consumer/inbox/inbox.go":                          "package inbox\n\nimport _ \"" + fake + "/platform/consumer\"\n",
		"platform/deadletter/deadletter.go":                         "package deadletter\n\nimport _ \"" + fake + "/platform/outbox/deadletters\"\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	g, err := archrules.Load(dir, "./...")
	require.NoError(t, err)

	tests := []struct {
		rule archrules.Rule
		want []string
	}{
		{archrules.PlatformImportsNoModule(fake), []string{fake + "/platform/host -> " + fake + "/modules/billing/contract"}},
		{archrules.DomainIsPure(fake), []string{fake + "/modules/promotion/internal/domain -> gorm.io/gorm"}},
		{archrules.AppReportsThroughPorts(fake), []string{
			fake + "/modules/billing/internal/app -> github.com/prometheus/client_golang/prometheus",
			fake + "/modules/promotion/internal/app/report -> go.opentelemetry.io/otel/trace",
		}},
		{archrules.ExpiryReportsThroughItsObserver(fake), []string{fake + "/modules/promotion/internal/expiry -> go.opentelemetry.io/otel/trace"}},
		{archrules.ModulesMeetOnlyThroughContracts(fake), []string{fake + "/modules/promotion/internal/ports -> " + fake + "/modules/billing/ledger"}},
		{archrules.ContractIsSelfContained(fake, "example.com/money"), []string{
			fake + "/modules/promotion/contract -> " + fake + "/modules/promotion/internal/app",
			fake + "/modules/promotion/contract -> example.com/moneyx",
			fake + "/modules/promotion/contract -> gorm.io/gorm",
		}},
		{archrules.TestSupportStaysInTests(fake), []string{
			fake + "/modules/promotion/internal/adapters -> " + fake + "/modules/promotion/internal/promotiontest",
			fake + "/modules/promotion/internal/adapters -> " + fake + "/platform/testbed",
		}},
		{archrules.ModulesWriteOnlyToTheOutbox(fake), []string{
			fake + "/modules/billing/internal/adapters -> " + fake + "/platform/outbox/deadletters",
			fake + "/modules/billing/internal/ports -> " + fake + "/platform/outbox/relay",
		}},
		{archrules.OutboxWriteAPIStandsAlone(fake), []string{fake + "/platform/outbox -> " + fake + "/platform/outbox/deadletters"}},
		{archrules.ModulesUseOnlyTheConsumerKit(fake), []string{fake + "/modules/billing/internal/ports -> " + fake + "/platform/consumer/deadletters"}},
		{archrules.ConsumerKitStandsApart(fake), []string{
			fake + "/platform/consumer -> " + fake + "/platform/consumer/deadletters",
			fake + "/platform/consumer/inbox -> " + fake + "/platform/consumer",
			fake + "/platform/consumer/inbox -> " + fake + "/platform/consumer/deadletters",
		}},
		{archrules.DeadLetterAdminKnowsNoSide(fake), []string{fake + "/platform/deadletter -> " + fake + "/platform/outbox/deadletters"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule.Name, func(t *testing.T) {
			var got []string
			for _, v := range archrules.Check(g, tt.rule) {
				got = append(got, v.Package+" -> "+v.Dependency)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestAppRuleMatchesTheRealLibraries checks the app rule against the real
// import paths of Prometheus and OpenTelemetry, and leaves slog and the
// module's own packages alone.
func TestAppRuleMatchesTheRealLibraries(t *testing.T) {
	t.Parallel()
	app := module + "/modules/promotion/internal/app"
	g := archrules.Graph{
		app: {"log/slog", "github.com/prometheus/client_golang/prometheus", "github.com/prometheus/common/expfmt",
			"go.opentelemetry.io/otel/trace", "github.com/google/uuid", module + "/platform/correlation"},
		module + "/modules/promotion/internal/ports": {"github.com/prometheus/client_golang/prometheus"},
	}
	var deps []string
	for _, v := range archrules.Check(g, archrules.AppReportsThroughPorts(module)) {
		deps = append(deps, v.Dependency)
	}
	require.ElementsMatch(t, []string{"github.com/prometheus/client_golang/prometheus", "github.com/prometheus/common/expfmt", "go.opentelemetry.io/otel/trace"}, deps)
}

// TestDomainRuleMatchesTheRealLibraries checks the domain rule against the
// real import paths it exists for, including a transitive dependency.
func TestDomainRuleMatchesTheRealLibraries(t *testing.T) {
	t.Parallel()
	domain := module + "/modules/promotion/internal/domain"
	g := archrules.Graph{
		domain: {"gorm.io/gorm", "github.com/labstack/echo/v5", "github.com/ThreeDotsLabs/watermill/message", "github.com/google/uuid"},
		module + "/modules/promotion/internal/adapters": {"gorm.io/gorm"},
	}
	var deps []string
	for _, v := range archrules.Check(g, archrules.DomainIsPure(module)) {
		deps = append(deps, v.Dependency)
	}
	require.ElementsMatch(t, []string{"gorm.io/gorm", "github.com/labstack/echo/v5", "github.com/ThreeDotsLabs/watermill/message"}, deps)
}

// TestNoTestStopsOffItsGoroutine holds the repository to testing's rule:
// FailNow (and so require and Fatal) must run on the test's goroutine.
func TestNoTestStopsOffItsGoroutine(t *testing.T) {
	t.Parallel()
	found, err := archrules.StopsOffTestGoroutine("../..")
	require.NoError(t, err)
	require.Empty(t, found, "report from the goroutine through a channel or an error, and fail on the test's goroutine")
}

// TestStopsOffTestGoroutineCatchesPlantedStops plants each kind of stop in
// a goroutine, in callbacks other goroutines run (an HTTP handler,
// time.AfterFunc, a kfake control function) and in a test-support file,
// and the same calls on the test's goroutine, which are fine.
func TestStopsOffTestGoroutineCatchesPlantedStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const planted = `package planted

import "testing"

func TestPlanted(t *testing.T) {
	require.NoError(t, nil)
	t.Fatal("on the test's goroutine: fine")
	go func() {
		require.NoError(t, nil)
		t.Fatalf("stop")
		assert.NoError(t, nil)
		t.Log("fine")
	}()
	t.Run("sub", func(st *testing.T) {
		var g errgroup.Group
		g.Go(func() error { publish(st, 1); return nil })
	})
}

func helper(tb testing.TB, ok bool) {
	go func() { tb.FailNow() }()
}

func TestCallbacks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/", r.URL.Path)
	}))
	time.AfterFunc(time.Second, func() { t.FailNow() })
	cluster.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		require.NoError(t, nil)
		return nil, nil, false
	})
	go check(t)
	check(t)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
}
`
	const support = `package planted

import "testing"

// StartThing is test support: a file that imports testing.
func StartThing(tb testing.TB) {
	go func() { tb.Fatal("stop") }()
}
`
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "pkg", "testdata"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "planted_test.go"), []byte(planted), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "testdata", "ignored_test.go"), []byte(planted), 0o644))
	// Not a test file and no testing import: code that ships, not looked at.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "planted.go"), []byte(strings.Replace(planted, `import "testing"`, "", 1)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pkg", "support.go"), []byte(support), 0o644))
	found, err := archrules.StopsOffTestGoroutine(dir)
	require.NoError(t, err)
	require.Equal(t, []string{
		"pkg/planted_test.go:9: require.NoError on a goroutine",
		"pkg/planted_test.go:10: t.Fatalf on a goroutine",
		"pkg/planted_test.go:16: publish hands the test's st to a goroutine's call",
		"pkg/planted_test.go:21: tb.FailNow on a goroutine",
		"pkg/planted_test.go:26: require.Equal on a goroutine",
		"pkg/planted_test.go:28: t.FailNow on a goroutine",
		"pkg/planted_test.go:30: require.NoError on a goroutine",
		"pkg/planted_test.go:33: go check hands the test's t to a goroutine",
		"pkg/support.go:7: tb.Fatal on a goroutine",
	}, found)
}

// TestNoLargeFileIsTracked keeps build outputs and dumps out of git (a 48 MB
// cmd/pin/pin once was): a file over 1 MB belongs in .gitignore.
func TestNoLargeFileIsTracked(t *testing.T) {
	t.Parallel()
	large, err := archrules.LargeTrackedFiles("../..", archrules.MaxTrackedFileBytes)
	if errors.Is(err, archrules.ErrNotGitCheckout) {
		t.Skip("not a git checkout: no tracked files to check")
	}
	require.NoError(t, err)
	require.Empty(t, large, "git rm --cached them, and name them in .gitignore")
}

// TestLargeTrackedFilesFindsAPlantedFile stages one file just over the
// limit and one at it in a throw-away repository.
func TestLargeTrackedFilesFindsAPlantedFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	_, err := archrules.LargeTrackedFiles(dir, 10)
	require.ErrorIs(t, err, archrules.ErrNotGitCheckout)

	out, err := exec.Command("git", "init", "-q", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd", "pin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "pin", "pin"), make([]byte, 11), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "at limit"), make([]byte, 10), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "untracked"), make([]byte, 100), 0o644))
	cmd := exec.Command("git", "add", "cmd/pin/pin", "at limit")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	large, err := archrules.LargeTrackedFiles(dir, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"cmd/pin/pin (11 bytes)"}, large)
}

// TestNoStatementInThePlatformIsAssembled holds the platform's statements
// whole (docs/adr/0029-the-consumer-kit-in-rooms.md): every statement a
// package of platform/ runs is one literal, a constant that is one, or its
// caller's; only the creation of a database, whose name no parameter can
// carry, is built.
func TestNoStatementInThePlatformIsAssembled(t *testing.T) {
	t.Parallel()
	found, err := archrules.FragmentedStatements("../..", "platform", map[string]string{
		"platform/postgres/migrate.go:EnsureDatabase": "CREATE DATABASE names a database, which no parameter can",
		"platform/outbox/write.go:WriteWith":          "its Prepare is Publisher.Prepare, which encodes events and runs no statement; the statement is the caller's",
	})
	require.NoError(t, err)
	require.Empty(t, found, "write the statement whole: one literal, values as parameters (a store's function, not a fragment)")
}

// TestFragmentedStatementsCatchesPlantedFragments runs the rule over a
// planted platform (testdata/statements): each way of assembling a
// statement is reported once, the whole ones, test files, test support and
// an allowed function are not, and an allowance needs its reason.
func TestFragmentedStatementsCatchesPlantedFragments(t *testing.T) {
	t.Parallel()
	allowed := map[string]string{"platform/db/db.go:EnsureDatabase": "CREATE DATABASE names a database"}
	found, err := archrules.FragmentedStatements("testdata/statements", "platform", allowed)
	require.NoError(t, err)
	require.Equal(t, []string{
		"platform/db/db.go:9: ExecContext runs a statement joined with +",
		"platform/store/store.go:28: QueryContext runs a statement joined with +",
		"platform/store/store.go:29: ExecContext runs a statement built by a call",
		"platform/store/store.go:30: QueryRowContext runs the constant readJoined, which is assembled",
		"platform/store/store.go:32: Exec runs q, which is not a constant",
		"platform/store/store.go:33: Raw runs a statement joined with +",
		"platform/store/store.go:34: Exec runs a statement joined with +",
	}, found)

	_, err = archrules.FragmentedStatements("testdata/statements", "platform", map[string]string{"platform/db/db.go:EnsureDatabase": " "})
	require.Error(t, err, "an allowance without a reason")
}

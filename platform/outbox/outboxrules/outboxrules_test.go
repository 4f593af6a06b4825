package outboxrules_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox/outboxrules"
)

// moduleDirs are the repository's modules: those under modules/ and the
// test-only ones cmd/pin registers with -tags pintestmodules.
func moduleDirs(t *testing.T) []string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	var dirs []string
	for _, pattern := range []string{"modules/*", "cmd/pin/testdata/modules/*"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		dirs = append(dirs, found...)
	}
	return dirs
}

// TestEveryPublishingModuleKeepsTheOutboxRules runs the rules over every
// module whose code imports the outbox: a new module is checked without
// a test of its own.
func TestEveryPublishingModuleKeepsTheOutboxRules(t *testing.T) {
	t.Parallel()
	var publishing []string
	for _, dir := range moduleDirs(t) {
		ok, err := outboxrules.Publishes(dir)
		require.NoError(t, err)
		if !ok {
			continue
		}
		publishing = append(publishing, filepath.Base(dir))
		require.NoError(t, outboxrules.CheckModule(dir), dir)
	}
	require.Subset(t, publishing, []string{"promotion", "reviews"}, "the rules see the modules that publish")
}

// plant writes a module of one file, text, and returns its folder.
func plant(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	return dir
}

const plantedModule = `package planted

import "github.com/pinmarket/pin/platform/outbox"

const postQuery = ` + "`" + `WITH posted AS (SELECT @id::uuid AS id),
published AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM posted)))
SELECT id FROM posted, published` + "`" + `

func post(out *outbox.Publisher) {
	_, _ = out.WriteWith(nil, tx, postQuery, nil, nil, nil)
}
`

// TestAModuleThatForgetsPublishedFails: a publishing module whose final
// SELECT leaves out the publication (so PostgreSQL never runs it) fails
// the rule, as do a statement built at run time, one that never calls
// outbox.publish, and one named through a helper of the module's own.
func TestAModuleThatForgetsPublishedFails(t *testing.T) {
	t.Parallel()
	require.NoError(t, outboxrules.CheckModule(plant(t, map[string]string{"planted.go": plantedModule})), "the planted module keeps the rules")

	forgot := strings.Replace(plantedModule, "SELECT id FROM posted, published", "SELECT id FROM posted", 1)
	err := outboxrules.CheckModule(plant(t, map[string]string{"planted.go": forgot}))
	require.ErrorContains(t, err, "postQuery")
	require.ErrorContains(t, err, "SELECT id FROM <written>, x")

	built := strings.Replace(plantedModule, "tx, postQuery,", `tx, postQuery+" ",`, 1)
	require.ErrorContains(t, outboxrules.CheckModule(plant(t, map[string]string{"planted.go": built})), "not a named literal")

	helper := strings.Replace(forgot, "func post(", `func write(out *outbox.Publisher, query string) { _, _ = out.WriteWith(nil, nil, query, nil, nil, nil) }

func post(`, 1)
	helper = strings.Replace(helper, "_, _ = out.WriteWith(nil, tx, postQuery, nil, nil, nil)", "write(out, postQuery)", 1)
	require.ErrorContains(t, outboxrules.CheckModule(plant(t, map[string]string{"planted.go": helper})), "SELECT id FROM <written>, x",
		"a query passed on through the module's own helper is followed")

	embedded := map[string]string{
		"planted.go": strings.Replace(plantedModule, "const postQuery = ", "//go:embed sql/post.sql\nvar postQuery string\n\nvar _ = ", 1),
		"sql/post.sql": "WITH posted AS (SELECT 1 AS id),\npublished AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM posted)))\n" +
			"SELECT id FROM posted",
	}
	require.ErrorContains(t, outboxrules.CheckModule(plant(t, embedded)), "SELECT id FROM <written>, x", "an embedded statement is read")
}

// TestAModuleThatNamesTheOutboxLayoutFails: the layout guard sees Go and
// SQL files alike.
func TestAModuleThatNamesTheOutboxLayoutFails(t *testing.T) {
	t.Parallel()
	err := outboxrules.CheckModule(plant(t, map[string]string{"planted.go": plantedModule, "sql/own.sql": "INSERT INTO outbox.messages (topic) VALUES ('t')"}))
	require.ErrorContains(t, err, "own.sql names the outbox's layout")
}

// The statement rule itself names the two ways events would be lost or
// misplaced.
func TestCheckPublishesNamesAStatementThatWouldLoseEvents(t *testing.T) {
	t.Parallel()
	const good = "WITH updated AS (SELECT 1 AS id),\npublished AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM updated)))\nSELECT id FROM updated, published"
	require.NoError(t, outboxrules.CheckPublishes(good))
	require.ErrorContains(t, outboxrules.CheckPublishes(strings.Replace(good, "FROM updated, published", "FROM updated", 1)), "SELECT id FROM <written>, x")
	require.ErrorContains(t, outboxrules.CheckPublishes(strings.Replace(good, "FROM updated, published", "FROM forgotten, published", 1)), "it must read updated")
	require.ErrorContains(t, outboxrules.CheckPublishes(`INSERT INTO outbox.messages (topic) VALUES ('t')`), "through outbox.publish")
}

package adapters_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// platform/outbox is the only writer of the outbox tables: the adapters
// hand it messages and never name an outbox table, its columns or its
// joined encoding (docs/architecture.md, the producer path).
func TestAdaptersLeaveTheOutboxLayoutToTheOutbox(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	sqlFiles, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, sqlFiles)
	for _, f := range append(files, sqlFiles...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, layout := range []string{"outbox.TableName", "outbox.RowSeparator", "outbox.Schema", "INTO outbox", "outbox.messages", "string_to_array", "payload::json"} {
			require.NotContains(t, string(text), layout, "%s knows the outbox's layout", f)
		}
	}
}

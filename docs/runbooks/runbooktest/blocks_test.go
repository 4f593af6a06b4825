package runbooktest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseBlocks reads annotated, unannotated, skipped and indented blocks
// of a planted runbook, and reports the mistakes a writer can make.
func TestParseBlocks(t *testing.T) {
	t.Parallel()
	doc := "# Runbook\n\n## Look\n\n" +
		"<!-- runbook-test: state=poison expect=rows match=\"purchaseId\" -->\n" +
		"```sh\npin promotion poison list\n```\n\n" +
		"1. Step:\n   <!-- runbook-test: state=due expect=ok needs=kcat -->\n   ```sql\n   SELECT 1;\n   ```\n\n" +
		"```sh\npin promotion snapshot --tenant <tenant_id>\n```\n\n" +
		"<!-- runbook-test: skip=\"needs Kafka's admin CLI\" -->\n```sh\nkafka-consumer-groups.sh --describe\n```\n\n" +
		"```json\n{\"not\": \"run\"}\n```\n\n" +
		"```console\n$ pin version\npin v1\n```\n"
	blocks, errs := ParseBlocks("x.md", doc)
	require.Empty(t, errs)
	require.Len(t, blocks, 6)

	require.Equal(t, "sh", blocks[0].Lang)
	require.Equal(t, "Look", blocks[0].Heading)
	require.Equal(t, 6, blocks[0].Line)
	require.Equal(t, &Annotation{State: "poison", Expect: ExpectRows, Match: "purchaseId"}, blocks[0].Test)

	require.Equal(t, "SELECT 1;\n", blocks[1].Text, "the list item's indentation is removed")
	require.Equal(t, &Annotation{State: "due", Expect: ExpectOK, Needs: []string{"kcat"}}, blocks[1].Test)

	require.Nil(t, blocks[2].Test, "a block without an annotation has no fixture")
	require.True(t, blocks[2].Runs())

	require.Equal(t, "needs Kafka's admin CLI", blocks[3].Test.Skip)
	require.False(t, blocks[4].Runs(), "a JSON block is not run")
	require.Equal(t, "pin version", blocks[5].Script(), "a console block runs its prompts only")

	filled, missing := Fill(blocks[2].Text, map[string]string{"purchase_id": "p"})
	require.Equal(t, []string{"tenant_id"}, missing)
	require.Contains(t, filled, "<tenant_id>")
	filled, missing = Fill("WHERE id = '<purchase_id>' AND a <> b AND n <= 1", map[string]string{"purchase_id": "p"})
	require.Empty(t, missing)
	require.Equal(t, "WHERE id = 'p' AND a <> b AND n <= 1", filled)
}

// TestParseBlocksReportsMistakes: each mistake is reported with the file
// and line.
func TestParseBlocksReportsMistakes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		doc  string
		want string
	}{
		{"<!-- runbook-test: state=due -->\n```sql\nSELECT 1;\n```\n", "x.md:1: runbook-test: expect=\"\""},
		{"<!-- runbook-test: expect=rows -->\n```sql\nSELECT 1;\n```\n", "x.md:1: runbook-test: no state="},
		{"<!-- runbook-test: state=due expect=rows colour=red -->\n```sql\nSELECT 1;\n```\n", `unknown attribute "colour"`},
		{"<!-- runbook-test: state=due expect=rows -->\nSome text.\n\n```sql\nSELECT 1;\n```\n", "x.md:1: a runbook-test comment must be the line right before"},
		{"```\npin version\n```\n", "x.md:1: a fenced block without a language"},
		{"```sh\npin version\n", "x.md:1: the fenced block is never closed"},
	} {
		_, errs := ParseBlocks("x.md", tt.doc)
		require.Len(t, errs, 1, tt.doc)
		require.Contains(t, fmt.Sprint(errs[0]), tt.want, tt.doc)
	}
}

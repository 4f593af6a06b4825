package contract_test

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// TestUpdateRewritesGeneratedFiles is the one writer of -update: the golden
// files, the embedded copy of the schema and the AsyncAPI document's
// examples (each the golden file of its name). It is not parallel, so it
// runs to its end before any parallel test of the package starts: none
// reads a file while it is rewritten.
func TestUpdateRewritesGeneratedFiles(t *testing.T) {
	if !*update {
		t.Skip("rewrites the generated files only with -update")
	}
	for _, tc := range goldenCases(t) {
		wire, err := contract.Marshal(tc.envelope)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(goldenPath(tc.name), indentJSON(t, wire), 0o644))
	}
	canonical, err := os.ReadFile(schemaPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("pin.promotion.purchase-changed.v1.schema.json", canonical, 0o644))
	t.Log("embedded schema refreshed; the next build embeds it")

	doc, err := os.ReadFile(asyncAPIPath)
	require.NoError(t, err)
	out, err := withExamplesFromGoldens(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(asyncAPIPath, out, 0o644))
}

// exampleName and examplePayload find, after the message's examples key,
// an example's name and then its payload key, whose indentation says where
// its block ends.
var (
	exampleName    = regexp.MustCompile(`^\s*- name: (\S+)\s*$`)
	examplePayload = regexp.MustCompile(`^(\s*)payload:\s*$`)
)

// withExamplesFromGoldens returns doc with each example's payload replaced
// by the golden file of the example's name, written as YAML in the
// document's style (fields in wire order, strings single-quoted, numbers as
// their JSON text).
func withExamplesFromGoldens(doc []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(doc), "\n")
	var out []string
	name, inExamples := "", false
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if strings.TrimSpace(lines[i]) == "examples:" {
			inExamples = true
			continue
		}
		if m := exampleName.FindStringSubmatch(lines[i]); m != nil && inExamples {
			name = m[1]
			continue
		}
		m := examplePayload.FindStringSubmatch(lines[i])
		if m == nil || name == "" {
			continue
		}
		indent := m[1] + "  "
		for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], indent) || strings.TrimSpace(lines[i+1]) == "") {
			i++ // the old payload
		}
		golden, err := os.ReadFile(goldenPath(name))
		if err != nil {
			return nil, fmt.Errorf("example %s: %w", name, err)
		}
		block, err := yamlOf(golden)
		if err != nil {
			return nil, fmt.Errorf("example %s: %w", name, err)
		}
		for _, l := range strings.SplitAfter(strings.TrimSuffix(block, "\n"), "\n") {
			out = append(out, indent+strings.TrimSuffix(l, "\n")+"\n")
		}
		name = ""
	}
	return []byte(strings.Join(out, "")), nil
}

// yamlOf writes a JSON document as block YAML, keeping its key order and
// its numbers' text (1500.00 stays 1500.00).
func yamlOf(jsonDoc []byte) (string, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(jsonDoc, &n); err != nil {
		return "", err
	}
	var restyle func(n *yaml.Node, key bool)
	restyle = func(n *yaml.Node, key bool) {
		n.Style = 0
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && !key {
			n.Style = yaml.SingleQuotedStyle
		}
		for i, c := range n.Content {
			restyle(c, n.Kind == yaml.MappingNode && i%2 == 0)
		}
	}
	restyle(&n, false)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return "", err
	}
	return buf.String(), enc.Close()
}

// TestExamplesFromGoldensKeepTheDocument: rewriting the examples from the
// golden files they equal changes no byte of the AsyncAPI document, so
// -update touches the examples only when a golden file changed.
func TestExamplesFromGoldensKeepTheDocument(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(asyncAPIPath)
	require.NoError(t, err)
	out, err := withExamplesFromGoldens(doc)
	require.NoError(t, err)
	require.Equal(t, string(doc), string(out))
}

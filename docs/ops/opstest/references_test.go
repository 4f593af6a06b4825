package opstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docPath is a repository path into docs/ as code comments and documents
// write it.
var docPath = regexp.MustCompile(`docs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(?:md|ya?ml|json|txt)`)

// toBeCreated are paths a procedure tells its reader to create.
var toBeCreated = map[string]bool{
	"docs/contracts/pin.promotion.purchase-changed.v2.schema.json": true, // version 2's procedure
}

// missingDocs returns the docs/ paths text names that do not exist under root.
func missingDocs(root, text string) []string {
	var missing []string
	for _, p := range docPath.FindAllString(text, -1) {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil && !toBeCreated[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// TestReferencedDocumentsExist reads every Go file, Markdown document,
// YAML file, script and the Makefile of the repository: each docs/ path
// they name exists, so a reader sent to a document finds it, and none
// sends the reader to an issue number instead of saying what was decided.
func TestReferencedDocumentsExist(t *testing.T) {
	t.Parallel()
	var missing []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != repoRoot || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yml", ".yaml", ".sh":
		default:
			if d.Name() != "Makefile" && d.Name() != "Dockerfile" {
				return nil
			}
		}
		if d.Name() == "references_test.go" {
			return nil // its planted paths
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		for _, p := range missingDocs(repoRoot, string(raw)) {
			missing = append(missing, rel+": "+p)
		}
		if rel != "CHANGELOG.md" {
			for _, ref := range trackerRefs(string(raw)) {
				missing = append(missing, rel+": "+ref+" (say what was decided, not which issue asked)")
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, missing, "documents named but not in the repository, or issue numbers")
}

// trackerRef is a reference to the project's issue tracker by number,
// which a reader of the repository cannot follow.
var trackerRef = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)

// trackerRefs returns the issue numbers text names, leaving lines that
// link an upstream project's issue (github.com/…) alone.
func trackerRefs(text string) []string {
	var refs []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "github.com/") {
			refs = append(refs, trackerRef.FindAllString(line, -1)...)
		}
	}
	return refs
}

// TestMissingDocsReportsPlanted shows the checks find a reference to a
// document that does not exist (and pass one that does) and issue numbers.
func TestMissingDocsReportsPlanted(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"docs/operations.md"},
		missingDocs(repoRoot, "See docs/operations.md or docs/architecture.md, and docs/runbooks/kafka.md."))
	require.Equal(t, []string{"issue 13", "Issue 7"},
		trackerRefs("// Hostile input (issue 13): …\nTargets of Issue 7.\nsee https://github.com/x/y/issues 12 upstream\nissues are fixed"))
}

// httpPIN is $PIN, or a PIN variable, used as an HTTP address; PIN names
// the binary (README, the pin dev banner), BASE the instance's address.
var httpPIN = regexp.MustCompile(`\$\{?PIN\}?/|\bPIN=https?:|address in ` + "`PIN`")

// TestPINNamesOnlyTheBinary reads the README and every document under
// docs/: none uses PIN for an HTTP address, so a reader who exported
// PIN as the binary never curls it.
func TestPINNamesOnlyTheBinary(t *testing.T) {
	t.Parallel()
	var found []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range httpPIN.FindAllString(string(raw), -1) {
			found = append(found, rel+": "+m)
		}
		return nil
	})
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	for _, m := range httpPIN.FindAllString(string(readme), -1) {
		found = append(found, "README.md: "+m)
	}
	require.Empty(t, found, "PIN used as an HTTP address; use BASE")
	require.NotEmpty(t, httpPIN.FindAllString(`curl -s "$PIN/metrics"`, -1), "the check finds a planted use")
}

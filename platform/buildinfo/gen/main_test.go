package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseConstantsAgreeWithTheirFiles fails once go.mod's toolchain line
// or CHANGELOG.md's newest release moves without `go generate
// ./platform/buildinfo`.
func TestReleaseConstantsAgreeWithTheirFiles(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "release.go")
	require.NoError(t, run("../../../go.mod", "../../../CHANGELOG.md", out))
	want, err := os.ReadFile(out)
	require.NoError(t, err)
	got, err := os.ReadFile("../release.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "platform/buildinfo/release.go is stale: run go generate ./platform/buildinfo")
}

func TestAFileWithoutTheLineIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	goMod := filepath.Join(dir, "go.mod")
	require.NoError(t, os.WriteFile(goMod, []byte("module x\n\ngo 1.26.0\n"), 0o644))
	err := run(goMod, "../../../CHANGELOG.md", filepath.Join(dir, "release.go"))
	require.ErrorContains(t, err, "no line matches")
}

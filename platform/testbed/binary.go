package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
)

// BuildBinary compiles the main package pkg (a directory or import path, as
// `go build` takes it, resolved from dir) into a new temporary directory and
// returns the binary's path and a function that removes that directory. It
// is for a TestMain, which has no testing.TB: black-box tests build the
// binary once per test process. The binary is built with the test's own
// build tags (`go test -tags …`), so a test run with the test-only modules
// (make test's pintestmodules) runs a binary that has them.
func BuildBinary(dir, pkg, name string) (path string, remove func(), err error) {
	tmp, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("testbed: build %s: %w", pkg, err)
	}
	path = filepath.Join(tmp, name)
	args := []string{"build", "-o", path}
	if tags := testTags(); tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("testbed: go build %s: %w\n%s", pkg, err, out)
	}
	return path, func() { _ = os.RemoveAll(tmp) }, nil
}

// testTags are the build tags this test binary was built with.
func testTags() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}

package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gitRepo is a repository of the version script's test, in a folder of its own.
type gitRepo struct {
	t   *testing.T
	dir string
}

// git runs git in the repository with a fixed identity and no user
// configuration, and returns its trimmed output.
func (r gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=pin", "-c", "user.email=pin@example.com",
		"-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %s:\n%s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// write puts a file into the work tree.
func (r gitRepo) write(path, text string) {
	r.t.Helper()
	path = filepath.Join(r.dir, path)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(r.t, os.WriteFile(path, []byte(text), 0o644))
}

// commit commits everything and returns the commit's hash.
func (r gitRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// version runs the repository's scripts/version.sh.
func (r gitRepo) version() string {
	r.t.Helper()
	cmd := exec.Command("bash", "scripts/version.sh")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "scripts/version.sh:\n%s", out)
	return strings.TrimSpace(string(out))
}

func releaseGo(version string) string {
	return "package buildinfo\n\nconst LastRelease = \"" + version + "\"\n"
}

// TestVersionScriptWithoutTagsSaysWhatDescribeSays builds a history as this
// repository's (a release drawn up afterwards, named by its commit in
// CHANGELOG.md; then a release commit as docs/releasing.md makes one), tags
// it, and clones it with --no-tags: in the clone, scripts/version.sh prints
// what `git describe --tags` prints in the tagged one, v0.3.0-N-g<hash>.
func TestVersionScriptWithoutTagsSaysWhatDescribeSays(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	script, err := os.ReadFile("../../scripts/version.sh")
	require.NoError(t, err)
	origin := gitRepo{t, t.TempDir()}
	origin.git("init", "-q")
	origin.write("scripts/version.sh", string(script))
	origin.write("main.go", "package main\n")
	origin.commit("start")
	origin.write("main.go", "package main // v0.3.0\n")
	released := origin.commit("the commit v0.3.0 stands for, tagged afterwards")
	origin.git("tag", "-a", "v0.3.0", "-m", "pin v0.3.0", released)
	origin.write("CHANGELOG.md", "## [0.3.0] - 2026-12-02\n\n[0.3.0]: https://github.com/pinmarket/pin/compare/0000000...\n"+
		"[0.3.0]: https://github.com/pinmarket/pin/compare/1a2b3c4..."+released[:7]+"\n")
	origin.write("platform/buildinfo/release.go", releaseGo("v0.3.0")) // drawn up afterwards
	origin.commit("changelog and release.go, after the release")
	origin.write("main.go", "package main\n\nfunc main() {}\n")
	head := origin.commit("work after the release")

	clone := func() gitRepo {
		c := gitRepo{t, t.TempDir()}
		c.git("clone", "-q", "--no-tags", origin.dir, ".")
		require.Empty(t, c.git("tag"), "a clone without tags")
		return c
	}
	want := "v0.3.0-2-g" + head[:7]
	require.Equal(t, want, origin.git("describe", "--tags", "--dirty"))
	require.Equal(t, want, origin.version(), "with the tags: git describe")
	c := clone()
	require.Equal(t, want, c.version(), "without them: the same, from CHANGELOG.md's commit")
	c.write("main.go", "package main // edited\n")
	require.Equal(t, want+"-dirty", c.version())

	// A release as docs/releasing.md cuts it: the release commit writes the
	// version into release.go; its changelog link names tags, not commits.
	origin.write("CHANGELOG.md", "## [0.4.0] - 2026-12-05\n\n## [0.3.0] - 2026-12-02\n\n"+
		"[0.4.0]: https://github.com/pinmarket/pin/compare/v0.3.0...v0.4.0\n"+
		"[0.3.0]: https://github.com/pinmarket/pin/compare/1a2b3c4..."+released[:7]+"\n")
	origin.write("platform/buildinfo/release.go", releaseGo("v0.4.0"))
	release := origin.commit("Release v0.4.0")
	origin.git("tag", "-a", "v0.4.0", "-m", "pin v0.4.0")
	require.Equal(t, "v0.4.0", origin.version())
	require.Equal(t, "v0.4.0", clone().version(), "on the release commit")
	origin.write("main.go", "package main\n\nfunc main() { _ = 1 }\n")
	head = origin.commit("work after v0.4.0")
	want = "v0.4.0-1-g" + head[:7]
	require.Equal(t, want, origin.version())
	require.Equal(t, want, clone().version())
	require.NotEqual(t, release, head)
}

// TestVersionScriptHereIsAReleaseVersion: this checkout, tags or not, gets
// a version, never a bare hash (unless it is shallow, and cannot count).
func TestVersionScriptHereIsAReleaseVersion(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	here := gitRepo{t, "../.."}
	if here.git("rev-parse", "--is-shallow-repository") == "true" {
		t.Skip("a shallow clone cannot count the commits since the release")
	}
	version := here.version()
	require.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(LastRelease)+`(-\d+-g[0-9a-f]{7,})?(-dirty)?$`), version)
	if _, err := exec.LookPath("make"); err == nil {
		cmd := exec.Command("make", "-n", "-s", "build")
		cmd.Dir = here.dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "linkedVersion="+version+" ", "make build links it")
	}
}

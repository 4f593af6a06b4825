package archrules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// ErrNotGitCheckout says that dir is not in a git work tree (an unpacked
// source archive, say), so there is nothing tracked to check.
var ErrNotGitCheckout = errors.New("archrules: not a git checkout")

// MaxTrackedFileBytes is the largest file the repository may track: a build
// output or a data dump above it belongs in .gitignore or elsewhere.
const MaxTrackedFileBytes = 1 << 20

// LargeTrackedFiles lists the files git's index holds in dir's repository
// whose content is larger than limit bytes, as "path (N bytes)".
func LargeTrackedFiles(dir string, limit int64) ([]string, error) {
	if err := git(dir, nil, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		return nil, ErrNotGitCheckout
	}
	// ls-files -s: "mode object stage<TAB>path" for each file of the index.
	staged, err := git(dir, nil, "ls-files", "-s", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("archrules: git ls-files: %w", err)
	}
	var objects bytes.Buffer
	var paths []string
	for _, entry := range strings.Split(strings.TrimSuffix(string(staged), "\x00"), "\x00") {
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			continue
		}
		objects.WriteString(fields[1] + "\n")
		paths = append(paths, path)
	}
	sizes, err := git(dir, &objects, "cat-file", "--batch-check=%(objectsize)").Output()
	if err != nil {
		return nil, fmt.Errorf("archrules: git cat-file: %w", err)
	}
	var large []string
	sc := bufio.NewScanner(bytes.NewReader(sizes))
	for i := 0; sc.Scan() && i < len(paths); i++ {
		size, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("archrules: size of %s: %q", paths[i], sc.Text())
		}
		if size > limit {
			large = append(large, fmt.Sprintf("%s (%d bytes)", paths[i], size))
		}
	}
	return large, sc.Err()
}

func git(dir string, stdin *bytes.Buffer, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = stdin
	}
	return cmd
}

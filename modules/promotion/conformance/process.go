package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvRun marks every process a run starts, and so what they start: the
// sweep at the end of the run finds by it whatever outlived its command,
// even a process that left its process group (setsid).
const EnvRun = "PIN_CONTRACT_RUN"

// OutputCap is the most the effects and dead-letters commands may print in
// one run of theirs; past it the command is killed and the scenario fails.
const OutputCap = 16 << 20

// waitDelay is how long a command's output is still read once it exited or
// was killed: a child that left its process group holding the pipe does not
// hold the run.
const waitDelay = time.Second

// shell is sh -c script in a process group of its own with the run's
// environment; when ctx is done the whole group is killed, not sh alone.
func (v *verifier) shell(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = v.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// output runs a command that reports (effects, dead letters) within the
// run's timeout and returns what it printed; what does not fit OutputCap,
// a command still running at the timeout and a failed one are errors that
// say so. Whatever it left running in its group is killed.
func (v *verifier) output(ctx context.Context, what, script string) ([]byte, error) {
	bounded, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	cmd := v.shell(bounded, script)
	out := &cappedBuffer{limit: OutputCap, exceeded: cancel}
	cmd.Stdout, cmd.Stderr = out, v.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the %s command could not start: %v", what, err)
	}
	v.noteGroup(cmd.Process.Pid)
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case out.over:
		return nil, fmt.Errorf("the %s command printed more than %d MiB, the most a run of it may print", what, OutputCap>>20)
	case bounded.Err() != nil:
		return nil, fmt.Errorf("the %s command did not finish within %s (--timeout); it was killed with its process group", what, v.timeout)
	case err != nil && !errors.Is(err, exec.ErrWaitDelay): // ErrWaitDelay: it succeeded, a child kept the pipe
		return nil, fmt.Errorf("the %s command failed: %v", what, err)
	}
	return out.buf.Bytes(), nil
}

// cappedBuffer keeps what is written up to limit; past it, it keeps nothing
// more and calls exceeded once.
type cappedBuffer struct {
	buf      bytes.Buffer
	limit    int
	over     bool
	exceeded func()
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.over {
		return len(p), nil
	}
	if c.buf.Len()+len(p) > c.limit {
		c.over = true
		c.exceeded()
		return len(p), nil
	}
	return c.buf.Write(p)
}

// consumerProcess is one start of the consumer command, in a process group
// of its own so that a kill reaches what sh -c started.
type consumerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it exited; err then says how
	err    error
	killed atomic.Bool // by --crash
	stderr *tailWriter
}

// startConsumer starts the consumer command.
func (v *verifier) startConsumer() error {
	cmd := exec.Command("sh", "-c", v.consumerCmd)
	cmd.Env = v.environ()
	tail := &tailWriter{w: v.stderr}
	cmd.Stdout, cmd.Stderr = v.stderr, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("contract verify: start the consumer: %w", err)
	}
	v.noteGroup(cmd.Process.Pid)
	p := &consumerProcess{cmd: cmd, exited: make(chan struct{}), stderr: tail}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	v.mu.Lock()
	v.proc = p
	v.mu.Unlock()
	return nil
}

func (v *verifier) current() *consumerProcess {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.proc
}

// kill SIGKILLs the consumer's process group.
func (p *consumerProcess) kill() {
	p.killed.Store(true)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// gone says whether the process exited.
func (p *consumerProcess) gone() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop ends the consumer at the end of the run: SIGTERM to its process
// group (SIGCONT too, should it be frozen), and SIGKILL to what is left of
// it after grace (sh may be gone while the consumer it started still shuts
// down).
func (p *consumerProcess) stop(grace time.Duration) {
	group := -p.cmd.Process.Pid
	_ = syscall.Kill(group, syscall.SIGTERM)
	_ = syscall.Kill(group, syscall.SIGCONT)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(group, 0) != nil {
			break // no process left in the group
		}
	}
	_ = syscall.Kill(group, syscall.SIGKILL)
	<-p.exited
}

// environ is the environment the run's commands start with.
func (v *verifier) environ() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.env
}

// noteGroup remembers a process group the run made, for the sweep.
func (v *verifier) noteGroup(pgid int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.groups[pgid] = true
}

// sweep kills every process that still carries the run's marker, and
// returns those that had left the process groups the run made (setsid,
// daemons), as `pid N ("cmdline")`. It finds nothing where there is no
// /proc.
func (v *verifier) sweep() []string {
	v.mu.Lock()
	groups := v.groups
	v.mu.Unlock()
	marker := []byte(EnvRun + "=" + v.runID + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var escaped, killed []string
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		environ, err := os.ReadFile(dir + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, environ...), append([]byte{0}, marker...)) {
			continue
		}
		pgid, _ := syscall.Getpgid(pid)
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		if syscall.Kill(pid, syscall.SIGKILL) != nil {
			continue
		}
		killed = append(killed, dir)
		if groups[pgid] {
			continue
		}
		line := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		escaped = append(escaped, fmt.Sprintf("pid %d (%.80q)", pid, line))
	}
	for _, dir := range killed { // soon gone, or a zombie without environment
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			environ, err := os.ReadFile(dir + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, environ...), append([]byte{0}, marker...)) {
				break
			}
		}
	}
	slices.Sort(escaped)
	return escaped
}

// tailLines is how many of its last stderr lines a consumer that exits
// is reported with, tailBytes how long they may be.
const (
	tailLines = 3
	tailBytes = 600
)

// tailWriter passes what is written on to w and keeps the last lines of it.
type tailWriter struct {
	w    io.Writer
	mu   sync.Mutex
	last []byte // at most 2 × tailBytes, cut at a line start
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.last = append(t.last, p...)
	if len(t.last) > 2*tailBytes {
		cut := t.last[len(t.last)-tailBytes:]
		if i := bytes.IndexByte(cut, '\n'); i >= 0 && i < len(cut)-1 {
			cut = cut[i+1:]
		}
		t.last = slices.Clone(cut)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// ended returns the last non-empty lines written, at most tailLines of them
// and tailBytes long.
func (t *tailWriter) ended() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.last)), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "" })
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	out := strings.Join(lines, "\n")
	if len(out) > tailBytes {
		out = "…" + out[len(out)-tailBytes:]
	}
	return out
}

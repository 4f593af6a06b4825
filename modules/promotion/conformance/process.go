package conformance

import (
	"fmt"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// of its own so that a kill reaches what sh -c started.
type consumerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it exited; err then says how
	err    error
	killed atomic.Bool // by --crash
}

// startConsumer starts the consumer command.
func (v *verifier) startConsumer() error {
	cmd := exec.Command("sh", "-c", v.consumerCmd)
	cmd.Env = v.env
	cmd.Stdout, cmd.Stderr = v.stderr, v.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("contract verify: start the consumer: %w", err)
	}
	p := &consumerProcess{cmd: cmd, exited: make(chan struct{})}
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
// group, and SIGKILL to what is left of it 5 s later (sh may be gone while
// the consumer it started still shuts down).
func (p *consumerProcess) stop() {
	group := -p.cmd.Process.Pid
	_ = syscall.Kill(group, syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(group, 0) != nil {
			break // no process left in the group
		}
	}
	_ = syscall.Kill(group, syscall.SIGKILL)
	<-p.exited
}

// arm sets where --crash kills the consumer during the next scenario: at
// its first commit that moves the group on, before the commit is applied;

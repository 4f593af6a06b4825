package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// The environment `pin contract verify` starts the consumer with
// (interfaces.md).
const (
	envContractBrokers = "PIN_CONTRACT_BROKERS"
	envContractTopic   = "PIN_CONTRACT_TOPIC"
	envContractGroup   = "PIN_CONTRACT_GROUP"
)

// errScenariosFailed is a verify run with a FAIL line: exit 1.
var errScenariosFailed = errors.New("contract verify: a scenario failed")

// contractCommand runs `pin contract verify …`.
func contractCommand(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const synopsis = "contract verify --consumer CMD --effects CMD [--brokers HOST:PORT] [--scenario NAME]... [--crash] [--timeout D]"
	if len(args) > 0 && isHelp(args[0]) {
		return parseFlags(newFlags("contract"), synopsis, args[:1], stdout)
	}
	if len(args) == 0 || args[0] != "verify" {
		return usageError{"contract: the only subcommand is verify"}
	}
	fs := newFlags("contract verify")
	consumerCmd := fs.String("consumer", "", "the consumer under test, run with sh -c and "+envContractBrokers+", "+envContractTopic+", "+envContractGroup)
	effectsCmd := fs.String("effects", "", `prints the consumer's side effects so far, one JSON object a line: {"purchaseId":"…","status":"Active","version":1} ("kind":"reversal" for a refund)`)
	brokers := fs.String("brokers", "", "a Kafka cluster to use (HOST:PORT[,HOST:PORT…]) instead of the embedded broker")
	var names stringList
	fs.Var(&names, "scenario", "run only this scenario (repeatable): "+strings.Join(scenarios.Names(), ", "))
	crash := fs.Bool("crash", false, "also SIGKILL the consumer at its offset commits (before and after one is applied) and start it again")
	timeout := fs.Duration("timeout", 30*time.Second, "how long a scenario may take the consumer to commit past its records, and the effects command to answer")
	if err := parseFlags(fs, synopsis, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("contract verify: unexpected argument %q", fs.Arg(0))}
	case *consumerCmd == "" || *effectsCmd == "":
		return usageError{"contract verify: --consumer and --effects are required"}
	case *timeout <= 0:
		return usageError{fmt.Sprintf("contract verify: --timeout %s must be above 0", *timeout)}
	}
	var chosen []scenarios.Scenario
	for _, name := range names {
		s, ok := scenarios.Named(name)
		if !ok {
			return fmt.Errorf("contract verify: no scenario %q (the scenarios: %s)", name, strings.Join(scenarios.Names(), ", "))
		}
		chosen = append(chosen, s)
	}
	if len(chosen) == 0 {
		chosen = scenarios.All()
	}

	broker := &verifyBroker{close: func() {}}
	if *brokers != "" {
		broker.addrs = strings.Split(*brokers, ",")
	} else {
		b, err := startVerifyBroker()
		if err != nil {
			return err
		}
		broker = b
	}
	defer broker.close()
	v := &verifier{
		consumerCmd: *consumerCmd, effectsCmd: *effectsCmd, crash: *crash, timeout: *timeout, broker: broker,
		group: "pin-contract-verify-" + uuid.NewString()[:8], stdout: stdout, stderr: stderr, kills: make(chan killedAt, 2),
	}
	v.env = append(slices.Clone(environ), envContractBrokers+"="+strings.Join(broker.addrs, ","),
		envContractTopic+"="+contract.Topic, envContractGroup+"="+v.group)
	return v.run(ctx, chosen)
}

// verifyBroker is the Kafka-protocol broker a verify run talks to.
type verifyBroker struct {
	addrs []string
	close func()
	// onCommit, for the embedded broker only, calls fn with each offset
	// commit before it is applied; fn returning true drops it.
	onCommit func(fn func(*kmsg.OffsetCommitRequest) (drop bool))
}

// verifier is one run of `pin contract verify`.
type verifier struct {
	consumerCmd, effectsCmd string
	crash                   bool
	timeout                 time.Duration
	broker                  *verifyBroker
	group                   string
	env                     []string
	stdout, stderr          io.Writer
	client                  *kgo.Client
	admin                   *kadm.Client

	mu        sync.Mutex       // guards what the broker's commit watcher shares
	proc      *consumerProcess // the consumer running now
	armed     []killPoint      // where to kill it next, at its next commit that moves the group on
	committed map[int32]int64  // the group's commits applied, by partition
	kills     chan killedAt    // at most the two armed points a scenario, read before the next is armed
}

// killPoint is where --crash kills the consumer at one of its commits.
type killPoint string

const (
	// killBeforeCommit kills it at its commit and drops the commit: what it
	// wrote since its last commit is read again after the restart.
	killBeforeCommit killPoint = "before its offset commit was applied"
	// killAfterCommit kills it once the commit is in, before it hears so:
	// whatever it meant to do after committing never happens.
	killAfterCommit killPoint = "right after its offset commit was applied"
)

// killedAt says the commit watcher killed the consumer: where, and the
// group member it was, for the run to take it out of the group.
type killedAt struct {
	point      killPoint
	memberID   string
	instanceID *string
}

// run is the whole of a verify run: it starts the consumer, then for each
// scenario produces its records, waits until the group committed past
// them (restarting the consumer wherever --crash killed it), reads the
// effects and judges them; one PASS or FAIL line each.
func (v *verifier) run(ctx context.Context, chosen []scenarios.Scenario) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(v.broker.addrs...), kgo.DefaultProduceTopic(contract.Topic),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		return fmt.Errorf("contract verify: kafka client: %w", err)
	}
	defer client.Close()
	v.client, v.admin = client, kadm.NewClient(client)
	if err := v.createTopic(ctx); err != nil {
		return err
	}
	if v.crash && v.broker.onCommit != nil {
		v.committed = map[int32]int64{}
		v.broker.onCommit(v.watchCommit)
	}
	if err := v.startConsumer(); err != nil {
		return err
	}
	defer func() { v.current().stop() }()

	failed := 0
	var mine []scenarios.Scenario // the run's scenarios so far: whose effects say what the consumer acts on
	for _, s := range chosen {
		mine = append(mine, s)
		fails := v.scenario(ctx, s, mine)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(fails) == 0 {
			fmt.Fprintf(v.stdout, "PASS %s\n", s.Name)
			continue
		}
		failed++
		fmt.Fprintf(v.stdout, "FAIL %s: %s\n", s.Name, strings.Join(fails, "; "))
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d", errScenariosFailed, failed, len(chosen))
	}
	return nil
}

// scenario runs one scenario and returns what broke.
func (v *verifier) scenario(ctx context.Context, s scenarios.Scenario, mine []scenarios.Scenario) []string {
	if v.current().gone() {
		if err := v.startConsumer(); err != nil {
			return []string{err.Error()}
		}
	}
	records := make([]*kgo.Record, len(s.Records))
	for i, r := range s.Records {
		rec := r.Record()
		records[i] = &kgo.Record{Key: rec.Key, Value: rec.Value}
		for _, k := range slices.Sorted(maps.Keys(rec.Headers)) {
			records[i].Headers = append(records[i].Headers, kgo.RecordHeader{Key: k, Value: []byte(rec.Headers[k])})
		}
	}
	v.arm()
	defer v.disarm()
	if err := v.client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return []string{fmt.Sprintf("produce the scenario's records: %v", err)}
	}
	past := map[int32]int64{}
	for _, r := range records {
		past[r.Partition] = max(past[r.Partition], r.Offset+1)
	}
	if v.crash && v.broker.onCommit == nil {
		v.killAtRandom(ctx)
	}
	if err := v.waitCommittedPast(ctx, past); err != nil {
		return []string{err.Error()}
	}
	select {
	case k := <-v.kills: // killed right after the commit that got it past: started again for the next scenario
		v.restartAfterKill(ctx, k)
	default:
	}
	effects, err := v.readEffects(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	return judge(s, mine, effects)
}

// judge holds the effects against s. Which statuses the consumer acts on is
// read from its effects (reversals aside) for every purchase of the run so
// far: a status it acted on once, it must act on whenever it is due.
func judge(s scenarios.Scenario, mine []scenarios.Scenario, effects []scenarios.Effect) []string {
	ours := map[uuid.UUID]bool{}
	for _, m := range mine {
		for _, p := range m.Purchases {
			ours[p.ID] = true
		}
	}
	actsOn := map[contract.Status]bool{}
	for _, e := range effects {
		if ours[e.PurchaseID] && e.Kind == "" { // a reversal is never required
			actsOn[e.Status] = true
		}
	}
	fails := scenarios.Judge(s, effects, func(st contract.Status) bool { return actsOn[st] })
	if len(actsOn) == 0 && slices.ContainsFunc(s.Effects, func(e scenarios.ExpectedEffect) bool { return e.Due }) {
		fails = append(fails, "the effects command printed no effect of any purchase of this run (want one line per effect the consumer made)")
	}
	return fails
}

// createTopic creates the topic with 3 partitions, as the producer's is;
// on --brokers it may exist already.
func (v *verifier) createTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	r, err := v.admin.CreateTopic(ctx, 3, -1, nil, contract.Topic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("contract verify: create %s on %s: %w", contract.Topic, strings.Join(v.broker.addrs, ","), err)
	}
	return nil
}

// waitCommittedPast polls the group's committed offsets until each
// partition's is at least past's. A consumer --crash killed is taken out of
// the group and started again, and the wait starts over; one that exits by
// itself fails the scenario.
func (v *verifier) waitCommittedPast(ctx context.Context, past map[int32]int64) error {
	deadline := time.Now().Add(v.timeout)
	var behind []string
	for {
		behind = behind[:0]
		offsets, err := v.admin.FetchOffsets(ctx, v.group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			offsets, err = kadm.OffsetResponses{}, nil // nothing committed yet
		}
		if err == nil {
			for _, p := range slices.Sorted(maps.Keys(past)) {
				o, ok := offsets.Lookup(contract.Topic, p)
				if !ok || o.At < past[p] {
					at := int64(-1)
					if ok {
						at = o.At
					}
					behind = append(behind, fmt.Sprintf("partition %d at %d of %d", p, at, past[p]))
				}
			}
			if len(behind) == 0 {
				return nil
			}
		}
		proc := v.current()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case k := <-v.kills:
			v.restartAfterKill(ctx, k)
			deadline = time.Now().Add(v.timeout)
			continue
		case <-proc.exited:
			if proc.killed.Load() {
				continue // the kill's report is on its way
			}
			return fmt.Errorf("the consumer exited (%v) before group %s committed past the scenario's records (%s)",
				proc.err, v.group, strings.Join(behind, ", "))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the committed offsets of group %s could not be read within %s: %v", v.group, v.timeout, err)
			}
			return fmt.Errorf("group %s did not commit past the scenario's records within %s (%s): does the consumer commit with %s?",
				v.group, v.timeout, strings.Join(behind, ", "), envContractGroup)
		}
	}
}

// readEffects runs the effects command and parses its lines.
func (v *verifier) readEffects(ctx context.Context) ([]scenarios.Effect, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", v.effectsCmd)
	cmd.Env = v.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, v.stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the effects command failed: %v", err)
	}
	var effects []scenarios.Effect
	lines := bufio.NewScanner(&out)
	lines.Buffer(nil, 1<<20)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		var e scenarios.Effect
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.PurchaseID == uuid.Nil || e.Status == "" || e.Version == 0 {
			return nil, fmt.Errorf(`the effects command's line %d is not an effect {"purchaseId":"…","status":"…","version":N}: %.200q`, n, line)
		}
		effects = append(effects, e)
	}
	return effects, lines.Err()
}

// consumerProcess is one start of the consumer command, in a process group
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
// then, started again, right after its next one is.
func (v *verifier) arm() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.crash {
		v.armed = []killPoint{killBeforeCommit, killAfterCommit}
	}
}

func (v *verifier) disarm() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.armed = nil
}

// watchCommit is called by the embedded broker with each offset commit,
// before it is applied; it kills the consumer there when a point is armed
// and the commit moves the group on. It returns whether to drop the commit.
// The group reads one topic, which a commit of version 10 names by id
// alone: every partition counts.
func (v *verifier) watchCommit(req *kmsg.OffsetCommitRequest) bool {
	if req.Group != v.group {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	moves := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			moves = moves || p.Offset > v.committed[p.Partition]
		}
	}
	if !moves || len(v.armed) == 0 {
		v.applied(req)
		return false
	}
	point := v.armed[0]
	v.armed = v.armed[1:]
	v.proc.kill()
	v.kills <- killedAt{point: point, memberID: req.MemberID, instanceID: req.InstanceID}
	if point == killBeforeCommit {
		return true
	}
	v.applied(req)
	return false
}

// applied notes the offsets of a commit the broker applies.
func (v *verifier) applied(req *kmsg.OffsetCommitRequest) {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			v.committed[p.Partition] = max(v.committed[p.Partition], p.Offset)
		}
	}
}

// restartAfterKill waits for the killed consumer to be gone, takes it out
// of the group (or the group would wait out its session timeout before the
// new one gets partitions), and starts it again.
func (v *verifier) restartAfterKill(ctx context.Context, k killedAt) {
	<-v.current().exited
	fmt.Fprintf(v.stderr, "pin: contract verify: killed the consumer (SIGKILL) %s; starting it again\n", k.point)
	v.leave(ctx, []kmsg.LeaveGroupRequestMember{{MemberID: k.memberID, InstanceID: k.instanceID}})
	if err := v.startConsumer(); err != nil {
		fmt.Fprintf(v.stderr, "pin: %v\n", err)
	}
}

// killAtRandom is --crash on a broker the run cannot watch (--brokers): it
// kills the consumer twice at a random moment within 200 ms after the
// records were produced, takes every member out of the group and starts
// it again.
func (v *verifier) killAtRandom(ctx context.Context) {
	for range 2 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(rand.N(200 * time.Millisecond)):
		}
		p := v.current()
		p.kill()
		<-p.exited
		fmt.Fprintf(v.stderr, "pin: contract verify: killed the consumer (SIGKILL) at a random moment after the records were produced; starting it again\n")
		var members []kmsg.LeaveGroupRequestMember
		if described, err := v.admin.DescribeGroups(ctx, v.group); err == nil {
			for _, m := range described[v.group].Members {
				members = append(members, kmsg.LeaveGroupRequestMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
			}
		}
		v.leave(ctx, members)
		if err := v.startConsumer(); err != nil {
			fmt.Fprintf(v.stderr, "pin: %v\n", err)
		}
	}
}

// leave takes members out of the group; a failure only costs the wait of
// their session timeout.
func (v *verifier) leave(ctx context.Context, members []kmsg.LeaveGroupRequestMember) {
	if len(members) == 0 {
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID, req.Members = v.group, members[0].MemberID, members
	if _, err := req.RequestWith(ctx, v.client); err != nil {
		fmt.Fprintf(v.stderr, "pin: contract verify: take the killed consumer out of group %s: %v\n", v.group, err)
	}
}

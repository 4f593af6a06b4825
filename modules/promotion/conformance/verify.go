package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// The environment the consumer and the effects command are started with
// (interfaces.md).
const (
	EnvBrokers = "PIN_CONTRACT_BROKERS"
	EnvTopic   = "PIN_CONTRACT_TOPIC"
	EnvGroup   = "PIN_CONTRACT_GROUP"
)

// ErrScenariosFailed is a run with a FAIL line.
var ErrScenariosFailed = errors.New("contract verify: a scenario failed")

// Config is one run of `pin contract verify`.
type Config struct {
	// Consumer is the consumer under test, run with sh -c.
	Consumer string
	// Effects prints the consumer's side effects so far, one JSON object a
	// line; run with sh -c.
	Effects string
	// DeadLetters prints the records the consumer dead-lettered so far, one
	// JSON object a line: {"partition":P,"offset":O,"rule":"…"}; run with
	// sh -c. None: refused records are judged by their effects alone.
	DeadLetters string
	// Brokers is a Kafka cluster to use; none: the embedded broker.
	Brokers []string
	// Scenarios are the scenarios to run, in order; none: scenarios.All.
	Scenarios []scenarios.Scenario
	// Crash also kills the consumer at its offset commits.
	Crash bool
	// Timeout bounds how long a scenario waits for the group's commits,
	// and each run of the effects command.
	Timeout time.Duration
	// Environ is the environment the commands start with, before the
	// PIN_CONTRACT_* variables.
	Environ []string
	// Stdout gets the PASS and FAIL lines; Stderr the commands' output
	// and the run's notes.
	Stdout, Stderr io.Writer
}

// Verify runs the consumer through the scenarios and prints one PASS or
// FAIL line each to Stdout; it returns ErrScenariosFailed (wrapped) when
// one failed.
func Verify(ctx context.Context, c Config) error {
	chosen := c.Scenarios
	if len(chosen) == 0 {
		chosen = scenarios.All()
	}
	broker := &verifyBroker{addrs: c.Brokers, close: func() {}}
	if len(c.Brokers) == 0 {
		b, err := startVerifyBroker()
		if err != nil {
			return err
		}
		broker = b
	}
	defer broker.close()
	id := uuid.NewString()[:8]
	v := &verifier{
		consumerCmd: c.Consumer, effectsCmd: c.Effects, deadLettersCmd: c.DeadLetters, crash: c.Crash, timeout: c.Timeout, broker: broker,
		group: "pin-contract-verify-" + id, runID: id, stdout: c.Stdout, stderr: &lockedWriter{w: c.Stderr},
		kills: make(chan killedAt, 2), groups: map[int]bool{}, committed: map[int32]int64{}, verdicts: newCommitVerdicts(),
	}
	v.env = append(slices.Clone(c.Environ), EnvBrokers+"="+strings.Join(broker.addrs, ","),
		EnvTopic+"="+contract.Topic, EnvGroup+"="+v.group, EnvRun+"="+v.runID)
	return v.run(ctx, chosen)
}

// verifyBroker is the Kafka-protocol broker a verify run talks to.
type verifyBroker struct {
	addrs []string
	close func()
	// onCommit, for the embedded broker only, calls fn with each offset
	// commit before it is applied, and hold, which runs a function while the
	// broker holds that commit and serves every other request; fn returning
	// true drops the commit.
	onCommit func(fn func(req *kmsg.OffsetCommitRequest, hold func(func())) (drop bool))
}

// verifier is one run of `pin contract verify`.
type verifier struct {
	consumerCmd, effectsCmd string
	deadLettersCmd          string
	crash                   bool
	timeout                 time.Duration
	broker                  *verifyBroker
	group                   string
	runID                   string // EnvRun's value: what the run started carries it
	groupN                  int    // how many fresh groups the run moved to
	env                     []string
	stdout, stderr          io.Writer
	client                  *kgo.Client
	admin                   *kadm.Client

	mu        sync.Mutex       // guards what the broker's commit watcher shares
	proc      *consumerProcess // the consumer running now
	armed     []killPoint      // where to kill it next, at its next commit that moves the group on
	committed map[int32]int64  // the group's commits applied, by partition
	kills     chan killedAt    // at most the two armed points a scenario, read before the next is armed
	groups    map[int]bool     // the process groups the run made
	verdicts  *commitVerdicts  // what the commits showed
	ctx       context.Context  // the run's, for the commit watcher
}

// run is the whole of a verify run: it starts the consumer, then for each
// scenario produces its records, waits until the group committed past
// them (restarting the consumer wherever --crash killed it), reads the
// effects and judges them; one PASS or FAIL line each.
func (v *verifier) run(ctx context.Context, chosen []scenarios.Scenario) error {
	// Uncompressed, as the relay's Sarama producer writes them (its default):
	// franz-go would snappy them, which some clients (kafkajs) cannot read alone.
	client, err := kgo.NewClient(kgo.SeedBrokers(v.broker.addrs...), kgo.DefaultProduceTopic(contract.Topic),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return fmt.Errorf("contract verify: kafka client: %w", err)
	}
	defer client.Close()
	v.client, v.admin = client, kadm.NewClient(client)
	if err := v.createTopic(ctx); err != nil {
		return err
	}
	v.ctx = ctx
	if v.broker.onCommit != nil {
		v.broker.onCommit(v.watchCommit)
	} else {
		fmt.Fprintln(v.stdout, "NOTE on --brokers the run cannot see the offset commits: whether a record was committed before its effect was visible was not checked")
	}
	if v.deadLettersCmd == "" {
		fmt.Fprintln(v.stdout, "NOTE without --dead-letters, refused records were judged by effects only: one the consumer skipped without dead-lettering it was not caught")
	}
	if err := v.startConsumer(); err != nil {
		return err
	}
	defer v.cleanUp(ctx)

	failed := 0
	var mine []scenarios.Scenario // the run's scenarios so far: whose effects say what the consumer acts on
	for _, s := range chosen {
		mine = append(mine, s)
		fails := v.scenario(ctx, s, mine)
		if ctx.Err() != nil {
			return fmt.Errorf("contract verify: stopped before scenario %s was judged: %w", s.Name, ctx.Err())
		}
		if len(fails) == 0 {
			fmt.Fprintf(v.stdout, "PASS %s\n", s.Name)
			continue
		}
		failed++
		fmt.Fprintf(v.stdout, "FAIL %s: %s\n", s.Name, strings.Join(fails, "; "))
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d", ErrScenariosFailed, failed, len(chosen))
	}
	return nil
}

// scenario runs one scenario and returns what broke.
func (v *verifier) scenario(ctx context.Context, s scenarios.Scenario, mine []scenarios.Scenario) []string {
	if v.current().gone() { // it exited in the scenario before, which failed for it
		if err := v.freshGroup(ctx); err != nil {
			return []string{err.Error()}
		}
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
	v.producingScenario()
	if err := v.client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return []string{fmt.Sprintf("produce the scenario's records: %v", err)}
	}
	v.register(s, records)
	past := map[int32]int64{}
	for _, r := range records {
		past[r.Partition] = max(past[r.Partition], r.Offset+1)
	}
	if v.crash && v.broker.onCommit == nil {
		v.killAtRandom(ctx)
	}
	if err := v.waitCommittedPast(ctx, past); err != nil {
		return append(v.lateVerdicts(s.Name, nil, func(contract.Status) bool { return false }), err.Error())
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
	fails, actsOn := judge(s, mine, effects)
	fails = append(v.lateVerdicts(s.Name, effects, actsOn), fails...)
	if v.deadLettersCmd != "" {
		letters, err := v.readDeadLetters(ctx)
		if err != nil {
			return append(fails, err.Error())
		}
		fails = append(fails, judgeDeadLetters(s, records, effects, letters)...)
	}
	return fails
}

// judge holds the effects against s. Which statuses the consumer acts on is
// read from its effects (reversals aside) for every purchase of the run so
// far: a status it acted on once, it must act on whenever it is due.
func judge(s scenarios.Scenario, mine []scenarios.Scenario, effects []scenarios.Effect) (fails []string, actsOn func(contract.Status) bool) {
	ours := map[uuid.UUID]bool{}
	for _, m := range mine {
		for _, p := range m.Purchases {
			ours[p.ID] = true
		}
	}
	acted := map[contract.Status]bool{}
	for _, e := range effects {
		if ours[e.PurchaseID] && e.Kind == "" { // a reversal is never required
			acted[e.Status] = true
		}
	}
	actsOn = func(st contract.Status) bool { return acted[st] }
	fails = scenarios.Judge(s, effects, actsOn)
	if len(acted) == 0 && slices.ContainsFunc(s.Effects, func(e scenarios.ExpectedEffect) bool { return e.Due }) {
		fails = append(fails, "the effects command printed no effect of any purchase of this run (want one line per effect the consumer made)")
	}
	return fails, actsOn
}

// freshGroup moves the run to a new consumer group whose offsets are the
// topic's end, so a consumer that exited on a record does not meet it again
// and fail every scenario after. The records no commit moved past are no
// longer judged at commit time.
func (v *verifier) freshGroup(ctx context.Context) error {
	ends, err := v.admin.ListEndOffsets(ctx, contract.Topic)
	if err != nil {
		return fmt.Errorf("contract verify: the topic's end offsets, for a fresh group: %w", err)
	}
	v.mu.Lock()
	v.groupN++
	v.group = fmt.Sprintf("pin-contract-verify-%s-%d", v.runID, v.groupN)
	v.committed = map[int32]int64{}
	v.verdicts.pending = map[int32][]sentRecord{}
	v.env = append(slices.DeleteFunc(slices.Clone(v.env), func(e string) bool { return strings.HasPrefix(e, EnvGroup+"=") }), EnvGroup+"="+v.group)
	group := v.group
	v.mu.Unlock()
	offsets := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { offsets.AddOffset(o.Topic, o.Partition, o.Offset, -1) })
	resp, err := v.admin.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("contract verify: start group %s at the topic's end: %w", group, err)
	}
	fmt.Fprintf(v.stderr, "pin: contract verify: the consumer exited; starting it again with group %s, at the topic's end\n", group)
	return nil
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
	frozen := v.frozen()
	var behind []string
	for {
		if f := v.frozen(); f > frozen { // the time the run held the consumer is not the consumer's
			deadline, frozen = deadline.Add(f-frozen), f
		}
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
			return fmt.Errorf("the consumer exited (%v) before group %s committed past the scenario's records (%s); its stderr ended: %q",
				proc.err, v.group, strings.Join(behind, ", "), proc.stderr.ended())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the committed offsets of group %s could not be read within %s: %v", v.group, v.timeout, err)
			}
			return fmt.Errorf("group %s did not commit past the scenario's records within %s (%s): does the consumer commit with %s?",
				v.group, v.timeout, strings.Join(behind, ", "), EnvGroup)
		}
	}
}

// frozen is how long the commit watcher held the consumer so far.
func (v *verifier) frozen() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if since := v.verdicts.frozenSince; !since.IsZero() {
		return v.verdicts.frozen + time.Since(since)
	}
	return v.verdicts.frozen
}

// readEffects runs the effects command and parses its lines.
func (v *verifier) readEffects(ctx context.Context) ([]scenarios.Effect, error) {
	out, err := v.output(ctx, "effects", v.effectsCmd)
	if err != nil {
		return nil, err
	}
	var effects []scenarios.Effect
	lines := bufio.NewScanner(bytes.NewReader(out))
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
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("the effects command's output: %v", err)
	}
	return effects, nil
}

// cleanUp ends the run: it stops the consumer (at once when ctx is done: a
// signal ends a run within 2 s), then kills whatever the run started that
// is still running, and notes what had left its process group.
func (v *verifier) cleanUp(ctx context.Context) {
	grace := 5 * time.Second
	if ctx.Err() != nil {
		grace = 300 * time.Millisecond
	}
	v.current().stop(grace)
	v.mu.Lock()
	looks, frozen := v.verdicts.looks, v.verdicts.frozen
	v.mu.Unlock()
	if looks > 0 {
		fmt.Fprintf(v.stderr, "pin: contract verify: held the consumer at %d offset commits to read its effects, %.1f s in all\n", looks, frozen.Seconds())
	}
	for _, p := range v.sweep() {
		fmt.Fprintf(v.stdout, "NOTE %s was still running after the run, outside the process group of the command that started it; killed it\n", p)
	}
}

// consumerProcess is one start of the consumer command, in a process group

// ErrNoEmbeddedBroker is a run without Brokers in a build without the
// embedded broker (-tags production).
var ErrNoEmbeddedBroker = errors.New("contract verify: no embedded broker in this build (built with -tags production); give --brokers HOST:PORT, or build a binary with it: make build")

// lockedWriter serialises the writes of the commands and the run to one
// writer, which need not be safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

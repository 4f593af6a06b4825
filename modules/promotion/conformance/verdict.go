package conformance

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// The verdict at commit time (ADR 0028): on the embedded broker the run
// sees each offset commit of the group before it is applied. When one moves
// the group past a record whose effect the run has not seen yet, it freezes
// the consumer's process group (SIGSTOP), reads the effects, and only then
// lets the consumer go on and the commit through. A record committed while
// its effect was not visible is lost to a crash at that moment, which
// --crash only hits by chance.

// effectKey names an effect by what it is the effect of.
type effectKey struct {
	purchase uuid.UUID
	status   contract.Status
	version  int64
}

// sentRecord is a record the run produced that no commit has moved the
// group past yet.
type sentRecord struct {
	scenario  string
	what      string
	partition int32
	offset    int64
	// effect is set for the first delivery of a transition that may act:
	// its effect, if the consumer makes one, must be visible once the record
	// is committed. Duplicates, stale and refused records have none.
	effect *effectKey
	// due says the effect must happen when the consumer acts on its status
	// (scenarios.ExpectedEffect.Due); otherwise it may happen or not.
	due bool
}

// commitVerdicts is what the run learnt at the commits.
type commitVerdicts struct {
	pending     map[int32][]sentRecord // by partition, in offset order
	registered  map[int32]int64        // the next offset the run knows of, by partition
	producing   chan struct{}          // closed once the scenario being produced is registered
	visible     map[effectKey]bool     // effects an effects run showed: they stay
	late        map[string][]sentRecord
	broken      map[string][]string // a commit that could not be judged, by scenario
	looks       int                 // how many times the consumer was held
	frozen      time.Duration       // how long the consumer was held so far: not its time
	frozenSince time.Time           // when the hold under way began; zero when none is
}

func newCommitVerdicts() *commitVerdicts {
	return &commitVerdicts{pending: map[int32][]sentRecord{}, registered: map[int32]int64{}, visible: map[effectKey]bool{},
		late: map[string][]sentRecord{}, broken: map[string][]string{}}
}

// producingScenario tells the commit watcher that records are on their
// way: a commit past what it knows waits for register.
func (v *verifier) producingScenario() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.verdicts.producing = make(chan struct{})
}

// register hands the watcher the scenario's records as produced, marking
// the first delivery of each transition that may act.
func (v *verifier) register(s scenarios.Scenario, produced []*kgo.Record) {
	may := map[effectKey]*scenarios.ExpectedEffect{}
	for i, e := range s.Effects {
		if e.StaleAfter == 0 {
			may[effectKey{e.PurchaseID, e.Status, e.Version}] = &s.Effects[i]
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, r := range s.Records {
		sent := sentRecord{scenario: s.Name, what: r.What, partition: produced[i].Partition, offset: produced[i].Offset}
		if e := r.Event; e != nil && r.Refuse == nil {
			k := effectKey{e.PurchaseID, e.Status, e.Version}
			if e := may[k]; e != nil {
				sent.effect, sent.due = &k, e.Due
				delete(may, k) // later copies are duplicates
			}
		}
		p := sent.partition
		v.verdicts.pending[p] = append(v.verdicts.pending[p], sent)
		v.verdicts.registered[p] = max(v.verdicts.registered[p], sent.offset+1)
	}
	if v.verdicts.producing != nil {
		close(v.verdicts.producing)
		v.verdicts.producing = nil
	}
}

// covered returns the pending records req moves the group past. Callers
// hold v.mu.
func (v *verifier) covered(req *kmsg.OffsetCommitRequest) (records []sentRecord, unknown bool) {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for _, r := range v.verdicts.pending[p.Partition] {
				if r.offset < p.Offset {
					records = append(records, r)
				}
			}
			unknown = unknown || p.Offset > v.verdicts.registered[p.Partition]
		}
	}
	return records, unknown
}

// needsLook says whether a commit past records must wait for an effects
// run: one of them may act and its effect was not seen yet. Callers hold
// v.mu.
func (v *verifier) needsLook(records []sentRecord) bool {
	return slices.ContainsFunc(records, func(r sentRecord) bool { return r.effect != nil && !v.verdicts.visible[*r.effect] })
}

// judgeCommit is the verdict on one commit that moves the group on, run
// while the broker holds it: it waits for records still being registered,
// freezes the consumer, reads the effects, and notes each record the
// commit moves past whose effect was not visible.
func (v *verifier) judgeCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) {
	v.mu.Lock()
	_, unknown := v.covered(req)
	wait := v.verdicts.producing
	v.mu.Unlock()
	if unknown && wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return
		}
	}
	v.mu.Lock()
	records, _ := v.covered(req)
	look := v.needsLook(records)
	v.mu.Unlock()
	if !look {
		v.settle(records, nil)
		return
	}
	group := -v.current().cmd.Process.Pid
	v.mu.Lock()
	v.verdicts.frozenSince = time.Now()
	v.mu.Unlock()
	_ = syscall.Kill(group, syscall.SIGSTOP)
	effects, err := v.readEffects(ctx)
	_ = syscall.Kill(group, syscall.SIGCONT)
	v.mu.Lock()
	v.verdicts.frozen += time.Since(v.verdicts.frozenSince)
	v.verdicts.frozenSince = time.Time{}
	v.verdicts.looks++
	v.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			v.mu.Lock()
			v.verdicts.broken[records[0].scenario] = append(v.verdicts.broken[records[0].scenario],
				fmt.Sprintf("at an offset commit, %v", err))
			v.mu.Unlock()
		}
		v.forget(records) // unjudged: a failing effects command is not run again for them
		return
	}
	v.settle(records, effects)
}

// forget takes records out of the pending ones without a verdict.
func (v *verifier) forget(records []sentRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range records {
		v.verdicts.pending[r.partition] = slices.DeleteFunc(v.verdicts.pending[r.partition], func(p sentRecord) bool { return p.offset == r.offset })
	}
}

// settle takes the records a commit moved past out of the pending ones,
// noting as late those that may act and whose effect was visible neither
// now nor before.
func (v *verifier) settle(records []sentRecord, effects []scenarios.Effect) {
	v.mu.Lock()
	for _, e := range effects {
		v.verdicts.visible[effectKey{e.PurchaseID, e.Status, e.Version}] = true
	}
	for _, r := range records {
		if r.effect != nil && !v.verdicts.visible[*r.effect] {
			v.verdicts.late[r.scenario] = append(v.verdicts.late[r.scenario], r)
		}
	}
	v.mu.Unlock()
	v.forget(records)
}

// lateVerdicts returns the scenario's failures found at the commits: a
// record committed before its effect was visible, when the consumer makes
// that effect after all (effects), or must (it is due and the consumer acts
// on its status).
func (v *verifier) lateVerdicts(name string, effects []scenarios.Effect, actsOn func(contract.Status) bool) []string {
	made := map[effectKey]bool{}
	for _, e := range effects {
		made[effectKey{e.PurchaseID, e.Status, e.Version}] = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fails := slices.Clone(v.verdicts.broken[name])
	var late []string
	for _, r := range v.verdicts.late[name] {
		if made[*r.effect] || (r.due && actsOn(r.effect.status)) {
			late = append(late, fmt.Sprintf("%s (partition %d, offset %d) was committed before its effect was visible", r.what, r.partition, r.offset))
		}
	}
	const most = 3
	if len(late) > most {
		late = append(late[:most], fmt.Sprintf("so were %d more", len(late)-most))
	}
	if len(late) > 0 {
		late[len(late)-1] += ": commit a record's offset only once its effect is durable"
	}
	return append(fails, late...)
}

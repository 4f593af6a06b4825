package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
// before it is applied; hold runs a function while the broker holds the
// commit and serves everything else. A commit that moves the group past a
// record whose effect was not seen yet is judged first (judgeCommit). With
// --crash armed, a commit that moves the group on kills the consumer: one
// is dropped, unjudged, since it never counts. It returns whether to drop
// the commit. The group reads one topic, which a commit of version 10
// names by id alone: every partition counts.
func (v *verifier) watchCommit(req *kmsg.OffsetCommitRequest, hold func(func())) (drop bool) {
	v.mu.Lock()
	if req.Group != v.group {
		v.mu.Unlock()
		return false
	}
	moves := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			moves = moves || p.Offset > v.committed[p.Partition]
		}
	}
	var point killPoint
	if moves && len(v.armed) > 0 {
		point = v.armed[0]
		v.armed = v.armed[1:]
	}
	if point == killBeforeCommit {
		v.proc.kill()
		v.kills <- killedAt{point: point, memberID: req.MemberID, instanceID: req.InstanceID}
		v.mu.Unlock()
		return true
	}
	records, unknown := v.covered(req)
	look := v.needsLook(records) || (unknown && v.verdicts.producing != nil)
	v.mu.Unlock()

	if look {
		hold(func() { v.judgeCommit(v.ctx, req) })
	} else {
		v.settle(records, nil)
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if point == killAfterCommit {
		v.proc.kill()
		v.kills <- killedAt{point: point, memberID: req.MemberID, instanceID: req.InstanceID}
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

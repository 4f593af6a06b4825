package contracttest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// expectation is what the contract promises after a scenario's records.
type expectation struct {
	purchases []*history // in the order first delivered
	byID      map[uuid.UUID]*history
	targets   []contract.Target // every target any record named
}

// history is what a projection had to apply of one purchase.
type history struct {
	label string
	id    uuid.UUID
	// latest is the payload of the highest version it had to apply; nil
	// when none.
	latest *contract.PurchaseChanged
}

// expect works out what a projection must hold after the records.
func expect(s Scenario) expectation {
	x := expectation{byID: map[uuid.UUID]*history{}}
	seenTarget := map[contract.Target]bool{}
	for _, r := range s.Records {
		if r.Event == nil {
			continue
		}
		var named struct {
			Payload struct {
				Targets []contract.Target `json:"targets"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(r.Record().Value, &named) // a value that is no event names no target
		for _, t := range named.Payload.Targets {
			if !seenTarget[t] && t.TargetID != uuid.Nil {
				seenTarget[t] = true
				x.targets = append(x.targets, t)
			}
		}
		id := r.Event.PurchaseID
		h := x.byID[id]
		if h == nil {
			h = &history{label: s.Label(id), id: id}
			x.byID[id] = h
			x.purchases = append(x.purchases, h)
		}
		if r.Refuse != nil {
			continue
		}
		e, err := contract.Decode(r.Record().Value, quiet)
		if err != nil {
			panic(fmt.Sprintf("contracttest: scenario %s: %s: %v", s.Name, r.What, err)) // an admitted record decodes
		}
		if p := e.Payload; h.latest == nil || p.Version > h.latest.Version {
			h.latest = &p
		}
	}
	return x
}

// quiet takes the warnings of decoding a scenario's own records.
var quiet = slog.New(slog.DiscardHandler)

// verify checks what a projection holds against the promises (its effects
// are JudgeEffects'): each purchase as its latest event says, each boost
// counted once.
func (x expectation) verify(c Consumer, obs Observation) []string {
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }

	handled := map[contract.TargetKind]bool{contract.TargetProject: true, contract.TargetPropertyObject: true, contract.TargetPost: true}
	if c.TargetKinds != nil {
		handled = map[contract.TargetKind]bool{}
		for _, k := range c.TargetKinds {
			handled[k] = true
		}
	}
	contributes := func(h *history) (active, handles bool) {
		if h.latest == nil {
			return false, false
		}
		for _, t := range h.latest.Targets {
			handles = handles || handled[t.TargetKind]
		}
		return h.latest.Status == contract.StatusActive, handles
	}
	if obs.Active != nil {
		for _, h := range x.purchases {
			active, handles := contributes(h)
			got := obs.Active[h.id]
			switch {
			case got == (active && handles), active && !handles:
			case h.latest == nil:
				fail("holds %s as Active, but every record of it had to be refused", h.label)
			case got:
				fail("holds %s as Active, but its latest event (version %d) says %s", h.label, h.latest.Version, h.latest.Status)
			default:
				fail("does not hold %s, whose latest event (version %d) says Active", h.label, h.latest.Version)
			}
		}
	}
	if obs.Boosts != nil {
		want := map[contract.Target]int{}
		for _, h := range x.purchases {
			if active, _ := contributes(h); active {
				for _, t := range h.latest.Targets {
					if handled[t.TargetKind] {
						want[t] += h.latest.BoostWeight
					}
				}
			}
		}
		for _, t := range x.targets {
			if got := obs.Boosts[t]; got != want[t] && handled[t.TargetKind] {
				fail("boost of %s %s is %d; the Active purchases' latest events make it %d", t.TargetKind, t.TargetID, got, want[t])
			}
		}
	}
	return fails
}

// CheckDelivered checks what c did after a real pipeline delivered the
// transitions made — the events as the producer wrote them, each at least
// once and in version order per purchase (a dead-lettered event waits for
// its replay, and its purchase's later events behind it), with whatever
// redeliveries came between (relay resends, snapshots, dead-letter
// replays). It judges them as a scenario whose records are the transitions
// made, in order: every transition due, its effect once. The test fed the
// consumer from the topic itself, so c.Handle is not called. It returns
// the promises broken, under the scenario name "pipeline".
func CheckDelivered(ctx context.Context, c Consumer, made []contract.Envelope) []Failure {
	s := scenarios.Scenario{Name: "pipeline"}
	known := map[uuid.UUID]bool{}
	for _, e := range made {
		if !known[e.Payload.PurchaseID] {
			known[e.Payload.PurchaseID] = true
			s.Purchases = append(s.Purchases, scenarios.Purchase{ID: e.Payload.PurchaseID})
		}
		value, err := contract.Marshal(e)
		if err != nil {
			return []Failure{{Scenario: s.Name, Message: fmt.Sprintf("encode a transition made: %v", err)}}
		}
		s.Records = append(s.Records, scenarios.ScenarioRecord{Key: e.AggregateID.String(), Value: string(value),
			Event: &scenarios.EventRef{PurchaseID: e.Payload.PurchaseID, Status: e.Payload.Status, Version: e.Payload.Version}})
	}
	slices.SortStableFunc(s.Records, func(a, b scenarios.ScenarioRecord) int { return cmp.Compare(a.Event.Version, b.Event.Version) })
	s.Effects = scenarios.AllowedEffects(s.Records)
	x := expect(s)
	obs, err := c.Observe(ctx)
	if err != nil {
		return []Failure{{Scenario: s.Name, Message: fmt.Sprintf("observe: %v", err)}}
	}
	fails := scenarios.Judge(s, obs.Effects, func(st contract.Status) bool { return slices.Contains(c.EffectOn, st) })
	var out []Failure
	for _, msg := range append(fails, x.verify(c, obs)...) {
		out = append(out, Failure{Scenario: s.Name, Message: msg})
	}
	return out
}

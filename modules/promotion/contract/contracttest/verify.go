package contracttest

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// expectation is what the contract promises after a scenario's records.
type expectation struct {
	purchases []*history // in the order first delivered
	byID      map[uuid.UUID]*history
	targets   []contract.Target // every target any record named
}

// history is what a consumer had to apply of one purchase.
type history struct {
	label string
	id    uuid.UUID
	// versions are the statuses of the events it had to acknowledge, with
	// their versions (one status per transition of a purchase).
	versions map[contract.Status]int64
	// due are the transitions delivered, as such, before any later one of
	// the purchase: their side effect must happen. A transition seen first
	// after a later one, or only in a snapshot, may act once or not at all.
	due map[contract.Status]bool
	// latest is the payload of the highest version it had to apply; nil
	// when none.
	latest *contract.PurchaseChanged
}

// expect works out the promises from the deliveries.
func (s Scenario) expect() expectation {
	x := expectation{byID: map[uuid.UUID]*history{}}
	seenTarget := map[contract.Target]bool{}
	for _, d := range s.deliveries {
		if d.event == nil {
			continue
		}
		p := d.event.Payload
		for _, t := range p.Targets {
			if !seenTarget[t] && t.TargetID != uuid.Nil {
				seenTarget[t] = true
				x.targets = append(x.targets, t)
			}
		}
		h := x.byID[p.PurchaseID]
		if h == nil {
			h = &history{label: cmp.Or(s.labels[p.PurchaseID], "purchase "+p.PurchaseID.String()), id: p.PurchaseID, versions: map[contract.Status]int64{}, due: map[contract.Status]bool{}}
			x.byID[p.PurchaseID] = h
			x.purchases = append(x.purchases, h)
		}
		if d.refuse != nil {
			continue
		}
		h.versions[p.Status] = p.Version
		if h.latest == nil || p.Version > h.latest.Version {
			h.due[p.Status] = !d.snapshot
			h.latest = &p
		}
	}
	return x
}

// verify checks the observation against the promises: each transition's
// side effect once (and the due ones at all), none for a record that had to
// be refused, never an older one after a newer one; a projection holding
// each purchase as its latest event says, each boost counted once.
func (x expectation) verify(c Consumer, obs Observation) []string {
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }

	type key struct {
		id     uuid.UUID
		status contract.Status
	}
	counts := map[key]int{}
	last := map[uuid.UUID]int64{}
	for _, e := range obs.Effects {
		h := x.byID[e.PurchaseID]
		if h == nil {
			continue // another scenario's
		}
		v, ok := h.versions[e.Status]
		if !ok {
			fail("made a side effect for %s %s, which no record it had to acknowledge carries", h.label, e.Status)
			continue
		}
		counts[key{h.id, e.Status}]++
		if v < last[h.id] {
			fail("went backwards: a side effect for %s %s (version %d) after one for version %d", h.label, e.Status, v, last[h.id])
		}
		last[h.id] = max(last[h.id], v)
	}
	effectOn := map[contract.Status]bool{}
	for _, s := range c.EffectOn {
		effectOn[s] = true
	}
	for _, h := range x.purchases {
		statuses := make([]contract.Status, 0, len(h.versions))
		for s := range h.versions {
			statuses = append(statuses, s)
		}
		slices.SortFunc(statuses, func(a, b contract.Status) int { return cmp.Compare(h.versions[a], h.versions[b]) })
		for _, s := range statuses {
			switch n := counts[key{h.id, s}]; {
			case n > 1:
				fail("the side effect for %s %s (version %d) happened %d times; the contract promises once", h.label, s, h.versions[s], n)
			case n == 0 && h.due[s] && effectOn[s]:
				fail("the side effect for %s %s (version %d) never happened", h.label, s, h.versions[s])
			}
		}
	}

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
// transitions made — the events as the producer wrote them — each at least
// once and in order per purchase, with whatever redeliveries came between
// (relay resends, snapshots, dead-letter replays). The test fed the consumer
// from the topic itself, so c.Handle is not called. It returns the promises
// broken, under the scenario name "pipeline".
func CheckDelivered(ctx context.Context, c Consumer, made []contract.Envelope) []Failure {
	x := expectation{byID: map[uuid.UUID]*history{}}
	for _, e := range made {
		p := e.Payload
		h := x.byID[p.PurchaseID]
		if h == nil {
			h = &history{label: "purchase " + p.PurchaseID.String(), id: p.PurchaseID,
				versions: map[contract.Status]int64{}, due: map[contract.Status]bool{}}
			x.byID[p.PurchaseID] = h
			x.purchases = append(x.purchases, h)
			x.targets = append(x.targets, p.Targets...)
		}
		h.versions[p.Status], h.due[p.Status] = p.Version, true
		if h.latest == nil || p.Version > h.latest.Version {
			h.latest = &p
		}
	}
	obs, err := c.Observe(ctx)
	if err != nil {
		return []Failure{{Scenario: "pipeline", Message: fmt.Sprintf("observe: %v", err)}}
	}
	var out []Failure
	for _, msg := range x.verify(c, obs) {
		out = append(out, Failure{Scenario: "pipeline", Message: msg})
	}
	return out
}

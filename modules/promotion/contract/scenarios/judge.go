package scenarios

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// Effect is one side effect of the consumer — an invoice issued, a notice
// sent, a refund — for the purchase, on its event of that status and
// version. `pin contract verify` reads it as one JSON line:
// {"purchaseId":"…","status":"Active","version":1}, "kind":"reversal" for a
// refund.
type Effect struct {
	// PurchaseID is the purchase the effect is about.
	PurchaseID uuid.UUID `json:"purchaseId"`
	// Status is the status of the event the consumer acted on.
	Status contract.Status `json:"status"`
	// Version is the version of the event the consumer acted on.
	Version int64 `json:"version"`
	// Kind is empty for an effect that stands on its own, KindReversal for
	// one that undoes the purchase's earlier effect (a refund of its
	// invoice).
	Kind string `json:"kind,omitempty"`
}

// KindReversal marks an effect that undoes an earlier effect of its
// purchase: it must come after that effect, never before.
const KindReversal = "reversal"

// String names e in a failure: {purchase 6f…, Active, v1}.
func (e Effect) String() string { return e.describe("purchase " + e.PurchaseID.String()) }

func (e Effect) describe(label string) string {
	s := fmt.Sprintf("{%s, %s, v%d}", label, e.Status, e.Version)
	if e.Kind != "" {
		s = e.Kind + " " + s
	}
	return s
}

// Judge checks the effects a consumer made, in the order it made
// them, against what s allows, and returns the promises broken (none for a
// consumer that keeps the contract). Effects of other purchases are
// ignored. actsOn says which statuses the consumer acts on: an allowed
// effect that is Due must then have happened. A reversal is never required
// (whether there is something to undo is the consumer's business), so
// actsOn names the statuses of its other effects. The rules: each allowed
// effect at most once, matched by purchase, status and version; no effect
// the scenario does not allow (a refused record's, a forged version's); no
// effect of a purchase after one of a higher version; a reversal only after
// an effect of its purchase it can undo; none for a record first delivered
// after a later version of its purchase (StaleAfter), which the version
// guard skips.
func Judge(s Scenario, effects []Effect, actsOn func(contract.Status) bool) []string {
	type key struct {
		id      uuid.UUID
		status  contract.Status
		version int64
	}
	mine := map[uuid.UUID]bool{}
	for _, p := range s.Purchases {
		mine[p.ID] = true
	}
	allowed := map[key]bool{}
	staleAfter := map[key]int64{}
	for _, e := range s.Effects {
		allowed[key{e.PurchaseID, e.Status, e.Version}] = true
		staleAfter[key{e.PurchaseID, e.Status, e.Version}] = e.StaleAfter
	}
	// What no record allows first, then how often, then in what order: a
	// redelivery acted on twice also goes backwards, and its count says why.
	var wrong, counted, order []string
	name := func(e Effect) string {
		label := s.Label(e.PurchaseID)
		if !strings.HasSuffix(label, e.PurchaseID.String()) {
			label += " " + e.PurchaseID.String()
		}
		return e.describe(label)
	}

	counts := map[key]int{}
	last := map[uuid.UUID]int64{}
	undoable := map[uuid.UUID]int{} // effects of the purchase not reversed yet
	for _, e := range effects {
		if !mine[e.PurchaseID] {
			continue
		}
		k := key{e.PurchaseID, e.Status, e.Version}
		switch {
		case e.Kind != "" && e.Kind != KindReversal:
			wrong = append(wrong, fmt.Sprintf("effect %s has kind %q (want none, or %q)", name(e), e.Kind, KindReversal))
			continue
		case !allowed[k]:
			wrong = append(wrong, fmt.Sprintf("effect %s performed, but no record the consumer had to acknowledge carries that status at that version (want none)", name(e)))
			continue
		case staleAfter[k] > 0:
			wrong = append(wrong, fmt.Sprintf("effect %s performed after v%d of the purchase was delivered (a stale record; want none)", name(e), staleAfter[k]))
			continue
		}
		counts[k]++
		if e.Version < last[e.PurchaseID] {
			order = append(order, fmt.Sprintf("effect %s performed after one of version %d: it went backwards", name(e), last[e.PurchaseID]))
		}
		last[e.PurchaseID] = max(last[e.PurchaseID], e.Version)
		if e.Kind == KindReversal {
			if undoable[e.PurchaseID] == 0 {
				order = append(order, fmt.Sprintf("effect %s performed before any effect of the purchase it could undo", name(e)))
				continue
			}
			undoable[e.PurchaseID]--
		} else {
			undoable[e.PurchaseID]++
		}
	}
	for _, x := range s.Effects {
		k := key{x.PurchaseID, x.Status, x.Version}
		e := Effect{PurchaseID: x.PurchaseID, Status: x.Status, Version: x.Version}
		switch n := counts[k]; {
		case n > 1:
			counted = append(counted, fmt.Sprintf("effect %s performed %d times (want once)", name(e), n))
		case n == 0 && x.Due && actsOn(x.Status):
			counted = append(counted, fmt.Sprintf("effect %s never performed (want once)", name(e)))
		}
	}
	fails := append(wrong, counted...)
	return append(fails, order...)
}

// AllowedEffects works out the Effects of a scenario from its records: for
// each purchase, the status of every record it had to acknowledge, at its
// version; due when delivered, as a transition, before any later one of the
// purchase; stale (StaleAfter, want none) when first delivered after a later
// one. By purchase in the order first named, then by version.
func AllowedEffects(records []ScenarioRecord) []ExpectedEffect {
	type history struct {
		id       uuid.UUID
		versions map[contract.Status]int64
		due      map[contract.Status]bool
		stale    map[contract.Status]int64
		latest   int64
	}
	var order []*history
	byID := map[uuid.UUID]*history{}
	for _, r := range records {
		if r.Event == nil {
			continue
		}
		h := byID[r.Event.PurchaseID]
		if h == nil {
			h = &history{id: r.Event.PurchaseID, versions: map[contract.Status]int64{}, due: map[contract.Status]bool{},
				stale: map[contract.Status]int64{}}
			byID[h.id] = h
			order = append(order, h)
		}
		if r.Refuse != nil {
			continue
		}
		if _, seen := h.versions[r.Event.Status]; !seen && r.Event.Version < h.latest {
			h.stale[r.Event.Status] = h.latest
		}
		h.versions[r.Event.Status] = r.Event.Version
		if r.Event.Version > h.latest {
			h.due[r.Event.Status] = !r.Snapshot
			h.latest = r.Event.Version
		}
	}
	var out []ExpectedEffect
	for _, h := range order {
		statuses := slices.Collect(maps.Keys(h.versions))
		slices.SortFunc(statuses, func(a, b contract.Status) int { return cmp.Compare(h.versions[a], h.versions[b]) })
		for _, st := range statuses {
			out = append(out, ExpectedEffect{EventRef: EventRef{PurchaseID: h.id, Status: st, Version: h.versions[st]}, Due: h.due[st],
				StaleAfter: h.stale[st]})
		}
	}
	return out
}

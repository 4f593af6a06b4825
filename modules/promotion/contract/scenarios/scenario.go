package scenarios

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// Scenario is a sequence of records as the topic may hand them to a
// consumer, each purchase's in partition order, and the side effects the
// contract then allows. It is data (the *.json files of this directory),
// read the same by contracttest, by `pin contract verify` and by a team in
// any language.
type Scenario struct {
	// Name names the scenario: "duplicates", "hostile-records"…
	Name string `json:"name"`
	// About says what the topic hands over and what must hold.
	About string `json:"about"`
	// Legacy marks a scenario kept for history, left out of Scenarios: what
	// a producer wrote before a rule of the contract changed.
	Legacy bool `json:"legacy,omitempty"`
	// Purchases name the scenario's purchases in failures ("purchase A").
	Purchases []Purchase `json:"purchases"`
	// Records are the records in the order produced.
	Records []ScenarioRecord `json:"records"`
	// Effects are the side effects a consumer may make: each at most once,
	// and exactly once when Due and the consumer acts on its status; never
	// one with StaleAfter. Any other effect of the scenario's purchases
	// breaks the contract.
	Effects []ExpectedEffect `json:"effects"`
}

// Purchase is one purchase of a scenario.
type Purchase struct {
	// Label names it in failures: "A", "B"…
	Label string `json:"label"`
	// ID is its purchaseId.
	ID uuid.UUID `json:"purchaseId"`
}

// ScenarioRecord is one record of a scenario as it goes on the topic, and
// what the contract asks of a consumer that receives it.
type ScenarioRecord struct {
	// What names the record in failures: "purchase A's Active (version 1)".
	What string `json:"what"`
	// Key is the record key.
	Key string `json:"key"`
	// Headers are the record headers.
	Headers map[string]string `json:"headers"`
	// Value is the record value when it is UTF-8 text; ValueBase64 otherwise.
	Value string `json:"value,omitempty"`
	// ValueBase64 is the record value when it is not UTF-8 text.
	ValueBase64 []byte `json:"valueBase64,omitempty"`
	// Event is the transition the record carries or pretends to carry; nil
	// when its value is no event at all.
	Event *EventRef `json:"event,omitempty"`
	// Snapshot is set for a redelivery of `pin promotion snapshot`.
	Snapshot bool `json:"snapshot,omitempty"`
	// Refuse is set for a record the consumer must refuse (dead-letter),
	// with an error naming one of its rules.
	Refuse *Refusal `json:"refuse,omitempty"`
}

// EventRef names a purchase's transition: purchase, status and version.
type EventRef struct {
	// PurchaseID is the purchase.
	PurchaseID uuid.UUID `json:"purchaseId"`
	// Status is the event's status.
	Status contract.Status `json:"status"`
	// Version is the event's version.
	Version int64 `json:"version"`
}

// Refusal says that a record must be refused and what the refusal names.
type Refusal struct {
	// Naming lists the rules (JSON fields) an error may name; empty: any
	// error will do.
	Naming []string `json:"naming"`
}

// ExpectedEffect is a side effect a consumer may make for a scenario, or,
// with StaleAfter, must not.
type ExpectedEffect struct {
	EventRef
	// Due says the effect must happen (once) when the consumer acts on its
	// status: the transition was delivered, as such, before any later one
	// of its purchase. Otherwise (seen first in a snapshot) it may happen
	// once or not at all.
	Due bool `json:"due"`
	// StaleAfter is, for a transition first delivered after a later one of
	// its purchase, that later version: the version guard skips the record,
	// so the effect must not happen. 0 otherwise.
	StaleAfter int64 `json:"staleAfter,omitempty"`
}

// Record returns r as a consumer receives it.
func (r ScenarioRecord) Record() contract.Record {
	value := r.ValueBase64
	if value == nil && r.Value != "" {
		value = []byte(r.Value)
	}
	headers := make(map[string]string, len(r.Headers))
	for k, v := range r.Headers {
		headers[k] = v
	}
	return contract.Record{Key: []byte(r.Key), Headers: headers, Value: value}
}

//go:embed *.json
var scenarioFiles embed.FS

// all holds the embedded scenarios, in the order of their files.
var all = func() []Scenario {
	entries, err := scenarioFiles.ReadDir(".")
	if err != nil {
		panic(fmt.Sprintf("scenarios: %v", err))
	}
	out := make([]Scenario, 0, len(entries))
	for _, e := range entries {
		data, err := scenarioFiles.ReadFile(e.Name())
		if err != nil {
			panic(fmt.Sprintf("scenarios: %v", err))
		}
		var s Scenario
		if err := json.Unmarshal(data, &s); err != nil {
			panic(fmt.Sprintf("scenarios: %s: %v", e.Name(), err)) // TestScenarioFilesAreTheBuilders reads them all
		}
		out = append(out, s)
	}
	return out
}()

// All returns the scenarios the contract's promises are checked on, legacy
// ones left out, each with purchases and targets of its own and fresh ids
// (Fresh), so one consumer and one database serve them all, run after run.
func All() []Scenario {
	var out []Scenario
	for _, s := range all {
		if !s.Legacy {
			out = append(out, s.Fresh())
		}
	}
	return out
}

// Named returns the scenario of that name, legacy ones included, with fresh
// ids; false when there is none.
func Named(name string) (Scenario, bool) {
	i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return all[i].Fresh(), true
}

// Names lists every scenario's name, legacy ones last.
func Names() []string {
	var names, legacy []string
	for _, s := range all {
		if s.Legacy {
			legacy = append(legacy, s.Name)
		} else {
			names = append(names, s.Name)
		}
	}
	return append(names, legacy...)
}

// uuidText matches a UUID as the scenarios write them.
var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// Fresh returns s with every id in it (purchase, tenant, package, target,
// message, correlation; the nil UUID excepted) replaced by a new random
// one, the same id by the same new one everywhere: its records are then
// new to a consumer that ran it before, and what it says holds unchanged.
func (s Scenario) Fresh() Scenario {
	ids := map[string]string{uuid.Nil.String(): uuid.Nil.String()}
	re := func(old string) string {
		if n, ok := ids[old]; ok {
			return n
		}
		n := uuid.NewString()
		ids[old] = n
		return n
	}
	reID := func(id uuid.UUID) uuid.UUID { return uuid.MustParse(re(id.String())) }
	out := s
	out.Purchases = slices.Clone(s.Purchases)
	for i := range out.Purchases {
		out.Purchases[i].ID = reID(out.Purchases[i].ID)
	}
	out.Records = make([]ScenarioRecord, len(s.Records))
	for i, r := range s.Records {
		r.Key = uuidText.ReplaceAllStringFunc(r.Key, re)
		headers := make(map[string]string, len(r.Headers))
		for k, v := range r.Headers {
			headers[k] = uuidText.ReplaceAllStringFunc(v, re)
		}
		r.Headers = headers
		r.Value = uuidText.ReplaceAllStringFunc(r.Value, re)
		if r.ValueBase64 != nil {
			r.ValueBase64 = uuidText.ReplaceAllFunc(bytes.Clone(r.ValueBase64), func(b []byte) []byte { return []byte(re(string(b))) })
		}
		if r.Event != nil {
			e := *r.Event
			e.PurchaseID = reID(e.PurchaseID)
			r.Event = &e
		}
		out.Records[i] = r
	}
	out.Effects = slices.Clone(s.Effects)
	for i := range out.Effects {
		out.Effects[i].PurchaseID = reID(out.Effects[i].PurchaseID)
	}
	return out
}

// Label names a purchase of s in failures: "purchase A", or "purchase"
// and its id when it has no label.
func (s Scenario) Label(id uuid.UUID) string {
	for _, p := range s.Purchases {
		if p.ID == id && p.Label != "" {
			return "purchase " + p.Label
		}
	}
	return "purchase " + id.String()
}

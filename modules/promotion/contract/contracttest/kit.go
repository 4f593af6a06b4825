package contracttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// Handler is the consumer under test as its Kafka client calls it: one
// record at a time, each purchase's records in partition order. It returns
// nil when the record is acknowledged (applied, or recognised as already
// applied) and an error when it is refused: dead-lettered, with the error
// saying why. Either way the kit goes on with the next record, as a
// partition does.
type Handler func(ctx context.Context, r contract.Record) error

// Observation is what the consumer did so far, as its team reads it back
// from its own store. The kit looks only at the purchases and targets of the
// scenario it runs.
type Observation struct {
	// Effects are the side effects made so far, in the order they were made.
	Effects []Effect
	// Active is, for a projection, the purchases whose contribution it holds
	// now (a boost projection: those with rows). Nil for a consumer that
	// keeps no state of a purchase.
	Active map[uuid.UUID]bool
	// Boosts is, for a boost projection, the weight it holds per target.
	// Nil for a consumer that keeps none; a target missing from it is 0.
	Boosts map[contract.Target]int
}

// Consumer is a consumer under test.
type Consumer struct {
	// Handle is called with every record (required).
	Handle Handler
	// Observe reads back what the consumer did (required).
	Observe func(ctx context.Context) (Observation, error)
	// EffectOn lists the statuses whose transition makes a side effect
	// that must happen: billing, Active; notifications, Active, Cancelled
	// and Expired; none for a projection. A reversal (a refund) is never
	// required, whatever its status: only held behind what it undoes.
	EffectOn []contract.Status
	// TargetKinds are the target kinds a projection handles (catalog:
	// Project and PropertyObject; news: Post); nil means the three of
	// contract version 1. A purchase with no target of these kinds may be
	// held or not.
	TargetKinds []contract.TargetKind
}

// Failure is one promise a consumer broke in one scenario.
type Failure struct {
	// Scenario names the scenario.
	Scenario string
	// Message says what went wrong, naming the purchase and the record.
	Message string
}

// String returns "scenario: message".
func (f Failure) String() string { return f.Scenario + ": " + f.Message }

// Run drives c through every scenario of Scenarios, each as a subtest of t
// that fails with the promises it broke.
func Run(t *testing.T, c Consumer) {
	t.Helper()
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			for _, f := range Check(t.Context(), c, s) {
				t.Error(f.Message)
			}
		})
	}
}

// Check drives c through the scenarios, in order, and returns every promise
// it broke; none for a consumer that keeps the contract. A scenario's
// failures are reported with its name; an error of Observe is one.
func Check(ctx context.Context, c Consumer, scenarios ...Scenario) []Failure {
	var out []Failure
	for _, s := range scenarios {
		for _, msg := range run(ctx, s, c) {
			out = append(out, Failure{Scenario: s.Name, Message: msg})
		}
	}
	return out
}

// run delivers the scenario's records and checks what the consumer did.
func run(ctx context.Context, s Scenario, c Consumer) []string {
	var fails []string
	for _, r := range s.Records {
		err := c.Handle(ctx, r.Record())
		switch {
		case r.Refuse == nil && err != nil:
			fails = append(fails, fmt.Sprintf("refused %s, which the contract admits: %v", r.What, err))
		case r.Refuse != nil && err == nil:
			fails = append(fails, fmt.Sprintf("acknowledged %s: it must be refused (dead-lettered)", r.What))
		case r.Refuse != nil && !names(err, r.Refuse.Naming):
			fails = append(fails, fmt.Sprintf("refused %s, but the error does not name the rule it broke (%s): %v",
				r.What, strings.Join(r.Refuse.Naming, " or "), err))
		}
	}
	obs, err := c.Observe(ctx)
	if err != nil {
		return append(fails, fmt.Sprintf("observe: %v", err))
	}
	fails = append(fails, scenarios.Judge(s, obs.Effects, func(st contract.Status) bool { return slices.Contains(c.EffectOn, st) })...)
	return append(fails, expect(s).verify(c, obs)...)
}

// names reports whether err names one of the rules (none: any error does).
func names(err error, rules []string) bool {
	if len(rules) == 0 {
		return true
	}
	return slices.ContainsFunc(rules, func(r string) bool { return strings.Contains(err.Error(), r) })
}

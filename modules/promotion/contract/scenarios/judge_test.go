package scenarios_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

func actsOnAll(contract.Status) bool { return true }

// named is the scenario of that name, with fresh ids.
func named(t *testing.T, name string) scenarios.Scenario {
	t.Helper()
	s, ok := scenarios.Named(name)
	require.True(t, ok, name)
	return s
}

// effectsOf are the effects a consumer acting on every transition makes,
// once each, in order.
func effectsOf(s scenarios.Scenario) []scenarios.Effect {
	var out []scenarios.Effect
	for _, e := range s.Effects {
		if e.Due {
			out = append(out, scenarios.Effect{PurchaseID: e.PurchaseID, Status: e.Status, Version: e.Version})
		}
	}
	return out
}

// TestJudgeMatchesEffectsByVersion: a notice for purchase A's Cancelled at
// a forged version 999 is no Cancelled v2 — the one the scenario allows is
// missing, and the forged one is named.
func TestJudgeMatchesEffectsByVersion(t *testing.T) {
	t.Parallel()
	s := named(t, "duplicates")
	require.Empty(t, scenarios.Judge(s, effectsOf(s), actsOnAll))
	effects := effectsOf(s)
	effects[1].Version = 999
	got := scenarios.Judge(s, effects, actsOnAll)
	require.Len(t, got, 2, "%q", got)
	require.Contains(t, got[0], ", Cancelled, v999} performed, but no record the consumer had to acknowledge carries that status at that version (want none)")
	require.Contains(t, got[1], ", Cancelled, v2} never performed (want once)")
}

// TestJudgeHoldsAReversalBehindWhatItReverses: a refund before the
// purchase's charge breaks the contract, after it it keeps it; a second
// refund of one charge does not; a kind other than reversal is named.
func TestJudgeHoldsAReversalBehindWhatItReverses(t *testing.T) {
	t.Parallel()
	s := named(t, "duplicates")
	s.Effects = s.Effects[:2] // purchase A alone
	charge := effectsOf(s)[0]
	refund := effectsOf(s)[1]
	refund.Kind = scenarios.KindReversal
	billing := func(st contract.Status) bool { return st == contract.StatusActive || st == contract.StatusCancelled }

	require.Empty(t, scenarios.Judge(s, []scenarios.Effect{charge, refund}, billing))
	got := scenarios.Judge(s, []scenarios.Effect{refund, charge}, billing)
	require.Len(t, got, 2, "%q", got)
	require.Regexp(t, `^effect reversal \{purchase A [0-9a-f-]{36}, Cancelled, v2\} performed before any effect of the purchase it could undo$`, got[0])
	require.Contains(t, got[1], ", Active, v1} performed after one of version 2: it went backwards")

	twice := scenarios.Judge(s, []scenarios.Effect{charge, refund, refund}, billing)
	require.Contains(t, strings.Join(twice, "\n"), "performed before any effect of the purchase it could undo")
	require.Contains(t, strings.Join(twice, "\n"), "Cancelled, v2} performed 2 times (want once)")

	odd := refund
	odd.Kind = "refund"
	require.Contains(t, scenarios.Judge(s, []scenarios.Effect{charge, odd}, billing)[0], `has kind "refund" (want none, or "reversal")`)
}

// TestJudgeAsksForDueEffectsOfTheStatusesTheConsumerActsOn: billing is
// not asked for a notice on Expired; a snapshot-only transition may act or
// not.
func TestJudgeAsksForDueEffectsOfTheStatusesTheConsumerActsOn(t *testing.T) {
	t.Parallel()
	s := named(t, "snapshot-redeliveries")
	active := func(st contract.Status) bool { return st == contract.StatusActive }
	var invoices []scenarios.Effect
	for _, e := range effectsOf(s) {
		if e.Status == contract.StatusActive {
			invoices = append(invoices, e)
		}
	}
	require.Empty(t, scenarios.Judge(s, invoices, active))
	got := scenarios.Judge(s, invoices[1:], active)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "{purchase A ")
	i := slices.IndexFunc(s.Effects, func(e scenarios.ExpectedEffect) bool { return !e.Due })
	require.GreaterOrEqual(t, i, 0, "the purchase known only from a snapshot")
}

// TestScenariosAreFreshEachTime: each call gives new ids, the same id
// replaced alike in key, headers, value and expectations; the nil UUID of
// a hostile record stays nil.
func TestScenariosAreFreshEachTime(t *testing.T) {
	t.Parallel()
	a, b := named(t, "hostile-records"), named(t, "hostile-records")
	require.NotEqual(t, a.Purchases[0].ID, b.Purchases[0].ID)
	require.Equal(t, a.Purchases[0].ID.String(), a.Records[0].Key)
	require.Contains(t, a.Records[0].Value, a.Records[0].Headers[contract.HeaderMessageID])
	require.Equal(t, a.Purchases[0].ID, a.Effects[0].PurchaseID)
	nilTenant := slices.IndexFunc(a.Records, func(r scenarios.ScenarioRecord) bool { return strings.Contains(r.What, "nil tenantId") })
	require.Contains(t, a.Records[nilTenant].Value, `"tenantId":"00000000-0000-0000-0000-000000000000"`)
}

// TestJudgeWantsNoEffectForAStaleRecord: purchase B's Active v1 comes for
// the first time after its Expired v2; the version guard skips it, so a
// charge for it breaks the contract, even from a consumer that never acted
// on the Expired (nothing of B went backwards among its effects).
func TestJudgeWantsNoEffectForAStaleRecord(t *testing.T) {
	t.Parallel()
	s := named(t, "older-after-newer")
	i := slices.IndexFunc(s.Effects, func(e scenarios.ExpectedEffect) bool { return e.StaleAfter > 0 })
	require.GreaterOrEqual(t, i, 0, "purchase B's Active v1")
	stale := s.Effects[i]
	require.Equal(t, scenarios.ExpectedEffect{EventRef: stale.EventRef, StaleAfter: 2}, stale)
	require.Empty(t, scenarios.Judge(s, effectsOf(s), actsOnAll))

	active := func(st contract.Status) bool { return st == contract.StatusActive }
	charges := []scenarios.Effect{effectsOf(s)[0], {PurchaseID: stale.PurchaseID, Status: stale.Status, Version: stale.Version}}
	require.Empty(t, scenarios.Judge(s, charges[:1], active))
	got := scenarios.Judge(s, charges, active)
	require.Equal(t, []string{"effect {purchase B " + stale.PurchaseID.String() +
		", Active, v1} performed after v2 of the purchase was delivered (a stale record; want none)"}, got)
}

// TestJudgeHoldsARefundOfAPurchaseNeverActivated: purchase A's Cancelled
// comes without its Active. Billing passes with no effect for A (and a
// charge and refund of B); a refund of A has nothing to undo. A notifier
// must notify A's cancellation.
func TestJudgeHoldsARefundOfAPurchaseNeverActivated(t *testing.T) {
	t.Parallel()
	s := named(t, "cancelled-without-activation")
	a := s.Purchases[0].ID
	var billing []scenarios.Effect
	for _, e := range effectsOf(s) {
		if e.PurchaseID != a {
			if e.Status == contract.StatusCancelled {
				e.Kind = scenarios.KindReversal
			}
			billing = append(billing, e)
		}
	}
	active := func(st contract.Status) bool { return st == contract.StatusActive }
	require.Len(t, billing, 2)
	require.Empty(t, scenarios.Judge(s, billing, active))

	refund := scenarios.Effect{PurchaseID: a, Status: contract.StatusCancelled, Version: 2, Kind: scenarios.KindReversal}
	got := scenarios.Judge(s, append(billing, refund), active)
	require.Equal(t, []string{"effect reversal {purchase A " + a.String() +
		", Cancelled, v2} performed before any effect of the purchase it could undo"}, got)

	require.Empty(t, scenarios.Judge(s, effectsOf(s), actsOnAll))
	got = scenarios.Judge(s, effectsOf(s)[1:], actsOnAll)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "{purchase A "+a.String()+", Cancelled, v2} never performed (want once)")
}

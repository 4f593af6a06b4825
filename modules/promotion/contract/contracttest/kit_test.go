package contracttest_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/contracttest"
)

var quiet = slog.New(slog.DiscardHandler)

// TestReferenceBillingKeepsTheContract: messageId dedupe and the version
// guard, one invoice per Active purchase, a refund only of an invoice.
func TestReferenceBillingKeepsTheContract(t *testing.T) {
	t.Parallel()
	contracttest.Run(t, (&contracttest.Billing{Logger: quiet}).Consumer())
}

// TestReferenceNotifierKeepsTheContract: messageId and Version, one notice
// per transition.
func TestReferenceNotifierKeepsTheContract(t *testing.T) {
	t.Parallel()
	contracttest.Run(t, (&contracttest.Notifier{Logger: quiet}).Consumer())
}

// failures runs c through the scenarios and returns the failures' text by
// scenario.
func failures(t *testing.T, c contracttest.Consumer, scenarios ...contracttest.Scenario) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range contracttest.Check(context.Background(), c, scenarios...) {
		out[f.Scenario] = append(out[f.Scenario], f.Message)
	}
	return out
}

// noDedupe invoices every Active record it decodes: the consumer the
// contract warns about.
type noDedupe struct {
	mu       sync.Mutex
	invoices []contracttest.Effect
}

func (n *noDedupe) consumer() contracttest.Consumer {
	return contracttest.Consumer{
		Handle: func(_ context.Context, r contract.Record) error {
			e, err := contract.DecodeRecord(r, quiet)
			if err != nil {
				return err
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if e.Payload.Status == contract.StatusActive {
				n.invoices = append(n.invoices, contracttest.Effect{PurchaseID: e.Payload.PurchaseID, Status: e.Payload.Status, Version: e.Payload.Version})
			}
			return nil
		},
		Observe: func(context.Context) (contracttest.Observation, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return contracttest.Observation{Effects: append([]contracttest.Effect(nil), n.invoices...)}, nil
		},
		EffectOn: []contract.Status{contract.StatusActive},
	}
}

// TestKitFailsAConsumerThatSkipsDedupe: duplicates, snapshots, replays and
// resends each invoice twice or more, and the kit says so naming the
// purchase.
func TestKitFailsAConsumerThatSkipsDedupe(t *testing.T) {
	t.Parallel()
	got := failures(t, (&noDedupe{}).consumer(), contracttest.Scenarios()...)
	for _, s := range []string{"duplicates", "snapshot-redeliveries", "dead-letter-replays", "relay-failover"} {
		require.NotEmpty(t, got[s], "scenario %q must fail it", s)
		require.Contains(t, strings.Join(got[s], "\n"), "times (want once)", s)
	}
	require.Regexp(t, `^effect \{purchase A [0-9a-f-]{36}, Active, v1\} performed 3 times \(want once\)$`, got["duplicates"][0])
	require.Empty(t, got["hostile-records"], "it decodes with the contract, so it refuses what the bounds refuse")
}

// byMessageID is c deduplicating by messageId alone: no version guard.
func byMessageID(c contracttest.Consumer) contracttest.Consumer {
	var mu sync.Mutex
	seen := map[uuid.UUID]bool{}
	handle := c.Handle
	c.Handle = func(ctx context.Context, r contract.Record) error {
		e, err := contract.DecodeRecord(r, quiet)
		if err != nil {
			return err
		}
		mu.Lock()
		again := seen[e.MessageID]
		seen[e.MessageID] = true
		mu.Unlock()
		if again {
			return nil
		}
		return handle(ctx, r)
	}
	return c
}

// TestKitFailsABillingWithoutAVersionGuard: billing deduplicating by
// messageId alone, as the contract's consumers table has it, invoices a
// purchase again on a snapshot under a new messageId (as main wrote one
// before it became a redelivery, and as --send-derived-ids still writes a
// purchase whose messageId is lost) and invoices an Active first seen after
// its purchase's Expired; the reference billing's version guard skips both,
// as the notifier's does.
func TestKitFailsABillingWithoutAVersionGuard(t *testing.T) {
	t.Parallel()
	got := failures(t, byMessageID((&noDedupe{}).consumer()), contracttest.LegacySnapshot(), contracttest.OlderAfterNewer())
	require.Len(t, got, 2)
	require.Len(t, got["legacy-snapshot"], 1)
	require.Regexp(t, `^effect \{purchase A [0-9a-f-]{36}, Active, v1\} performed 2 times \(want once\)$`, got["legacy-snapshot"][0])
	require.Len(t, got["older-after-newer"], 1)
	require.Regexp(t, `^effect \{purchase B [0-9a-f-]{36}, Active, v1\} performed after v2 of the purchase was delivered \(a stale record; want none\)$`,
		got["older-after-newer"][0])
	for _, c := range []contracttest.Consumer{(&contracttest.Billing{Logger: quiet}).Consumer(), (&contracttest.Notifier{Logger: quiet}).Consumer()} {
		require.Empty(t, failures(t, c, contracttest.LegacySnapshot(), contracttest.OlderAfterNewer()))
	}
}

// TestKitFailsABillingThatRefundsWhatItNeverCharged: a Cancelled whose
// Active never came has no invoice to refund; billing that refunds every
// Cancelled pays out money nobody paid in.
func TestKitFailsABillingThatRefundsWhatItNeverCharged(t *testing.T) {
	t.Parallel()
	n := &noDedupe{}
	c := n.consumer()
	invoice := c.Handle
	c.Handle = func(ctx context.Context, r contract.Record) error {
		e, err := contract.DecodeRecord(r, quiet)
		if err != nil || e.Payload.Status != contract.StatusCancelled {
			return invoice(ctx, r)
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		n.invoices = append(n.invoices, contracttest.Effect{PurchaseID: e.Payload.PurchaseID, Status: e.Payload.Status,
			Version: e.Payload.Version, Kind: contracttest.KindReversal})
		return nil
	}
	got := failures(t, c, contracttest.CancelledWithoutActivation())["cancelled-without-activation"]
	require.Len(t, got, 1)
	require.Regexp(t, `^effect reversal \{purchase A [0-9a-f-]{36}, Cancelled, v2\} performed before any effect of the purchase it could undo$`, got[0])
	require.Empty(t, failures(t, (&contracttest.Billing{Logger: quiet}).Consumer(), contracttest.CancelledWithoutActivation()))
}

// unguarded notifies every new messageId, without a version guard.
type unguarded struct{ noDedupe }

// TestKitFailsANotifierWithoutAVersionGuard: the older event first seen
// after a newer one is notified; the kit reports it as stale.
func TestKitFailsANotifierWithoutAVersionGuard(t *testing.T) {
	t.Parallel()
	var u unguarded
	seen := map[string]bool{}
	c := u.consumer()
	handle := c.Handle
	c.EffectOn = []contract.Status{contract.StatusActive, contract.StatusCancelled, contract.StatusExpired}
	c.Handle = func(ctx context.Context, r contract.Record) error {
		e, err := contract.DecodeRecord(r, quiet)
		if err != nil || seen[e.MessageID.String()] {
			return err
		}
		seen[e.MessageID.String()] = true
		if e.Payload.Status == contract.StatusActive {
			return handle(ctx, r)
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		u.invoices = append(u.invoices, contracttest.Effect{PurchaseID: e.Payload.PurchaseID, Status: e.Payload.Status, Version: e.Payload.Version})
		return nil
	}
	got := failures(t, c, contracttest.OlderAfterNewer())["older-after-newer"]
	require.Len(t, got, 1)
	require.Regexp(t, `^effect \{purchase B [0-9a-f-]{36}, Active, v1\} performed after v2 of the purchase was delivered \(a stale record; want none\)$`, got[0])
}

// TestKitFailsAConsumerThatAcceptsWhatTheBoundsRefuse: a consumer that
// decodes without DecodeRecord's bounds acknowledges the hostile records
// and invoices the made-up purchase.
func TestKitFailsAConsumerThatAcceptsWhatTheBoundsRefuse(t *testing.T) {
	t.Parallel()
	var b contracttest.Billing
	b.Logger = quiet
	c := b.Consumer()
	c.Handle = func(ctx context.Context, r contract.Record) error {
		if _, err := contract.Decode(r.Value, quiet); err != nil {
			return err
		}
		r.Value = []byte(strings.Replace(string(r.Value), `"version":0`, `"version":1`, 1))
		return b.Handle(ctx, r)
	}
	got := strings.Join(failures(t, c, contracttest.HostileRecords())["hostile-records"], "\n")
	require.Contains(t, got, "acknowledged a record with version 0: it must be refused (dead-lettered)")
}

// projection is a boost projection in memory: the latest applied event of
// each purchase, with or without the version guard.
type projection struct {
	guard  bool
	mu     sync.Mutex
	latest map[string]contract.PurchaseChanged
}

func (p *projection) consumer() contracttest.Consumer {
	p.latest = map[string]contract.PurchaseChanged{}
	return contracttest.Consumer{
		Handle: func(_ context.Context, r contract.Record) error {
			e, err := contract.DecodeRecord(r, quiet)
			if err != nil {
				return err
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if old, ok := p.latest[e.AggregateID.String()]; !ok || !p.guard || e.Payload.Version > old.Version {
				p.latest[e.AggregateID.String()] = e.Payload
			}
			return nil
		},
		Observe: func(context.Context) (contracttest.Observation, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			obs := contracttest.Observation{Active: map[uuid.UUID]bool{}, Boosts: map[contract.Target]int{}}
			for _, e := range p.latest {
				if e.Status != contract.StatusActive {
					continue
				}
				for _, t := range e.Targets {
					if t.TargetKind.Known() {
						obs.Active[e.PurchaseID] = true
						obs.Boosts[t] += e.BoostWeight
					}
				}
			}
			return obs, nil
		},
	}
}

// TestKitChecksWhatAProjectionHolds: a projection with a version guard
// passes; without one, the older Active after the Cancelled revives the
// purchase and its boost, and the kit names both.
func TestKitChecksWhatAProjectionHolds(t *testing.T) {
	t.Parallel()
	contracttest.Run(t, (&projection{guard: true}).consumer())
	got := failures(t, (&projection{}).consumer(), contracttest.OlderAfterNewer())["older-after-newer"]
	require.Len(t, got, 4, "%q", got)
	require.Contains(t, got, "holds purchase A as Active, but its latest event (version 2) says Cancelled")
	require.Contains(t, strings.Join(got, "\n"), "the Active purchases' latest events make it 0")
}

// TestCheckDeliveredJudgesWhatAPipelineDelivered: the events made, each
// delivered twice, pass; one never delivered is a transition whose side
// effect never happened.
func TestCheckDeliveredJudgesWhatAPipelineDelivered(t *testing.T) {
	t.Parallel()
	var made []contract.Envelope
	n := &contracttest.Notifier{Logger: quiet}
	p := &projection{guard: true}
	pc := p.consumer()
	for i := range 2 {
		e := event(t, contract.StatusActive, 1)
		made = append(made, e, event(t, contract.StatusExpired, 2, e))
		if i == 0 {
			continue // the first purchase's records never reach the consumers
		}
		for _, e := range made[2:] {
			for range 2 {
				require.NoError(t, n.Handle(context.Background(), record(e)))
				require.NoError(t, pc.Handle(context.Background(), record(e)))
			}
		}
	}
	require.Empty(t, contracttest.CheckDelivered(context.Background(), n.Consumer(), made[2:]))
	require.Empty(t, contracttest.CheckDelivered(context.Background(), pc, made[2:]))
	got := contracttest.CheckDelivered(context.Background(), n.Consumer(), made)
	require.Len(t, got, 2, "%v", got)
	require.Equal(t, "pipeline", got[0].Scenario)
	require.Contains(t, got[0].Message, ", Active, v1} never performed (want once)")
}

// event is a valid event of a new purchase, or of of's purchase when given.
func event(t *testing.T, status contract.Status, version int64, of ...contract.Envelope) contract.Envelope {
	t.Helper()
	p := contract.PurchaseChanged{
		PurchaseID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "project-boost-week",
		PackageKind: contract.KindProjectBoost, Targets: []contract.Target{{TargetKind: contract.TargetProject, TargetID: uuid.New()}},
		PaymentStatus: contract.PaymentNotRequired, BoostWeight: 3,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		Price: contract.Price{Amount: contract.NewAmount(decimal.NewFromInt(10)), CurrencyID: contract.CurrencyIDRUB, Currency: contract.RUBCurrency()},
	}
	if len(of) > 0 {
		p = of[0].Payload
	}
	p.Status, p.Version = status, version
	e := contract.NewEnvelope(p, uuid.New(), time.Now())
	require.NoError(t, e.Validate())
	return e
}

// record lays e out as the relay does.
func record(e contract.Envelope) contract.Record {
	value, err := contract.Marshal(e)
	if err != nil {
		panic(err)
	}
	return contract.Record{Key: []byte(e.AggregateID.String()), Value: value,
		Headers: map[string]string{contract.HeaderMessageID: e.MessageID.String(), contract.HeaderEventType: contract.EventType}}
}

// TestKitFailsAConsumerThatRefusesWhatALaterRevisionMayWrite: holding
// records to the producer's rules (Validate) instead of the bounds refuses
// unknown enum values and contract version 2, which the contract says to
// keep and warn about.
func TestKitFailsAConsumerThatRefusesWhatALaterRevisionMayWrite(t *testing.T) {
	t.Parallel()
	n := &contracttest.Notifier{Logger: quiet}
	c := n.Consumer()
	c.Handle = func(ctx context.Context, r contract.Record) error {
		e, err := contract.DecodeRecord(r, quiet)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			return err
		}
		return n.Handle(ctx, r)
	}
	got := failures(t, c, contracttest.UnknownEnumValues(), contracttest.OtherContractVersions())
	require.Contains(t, got["unknown-enum-values"],
		`refused purchase A's Active (version 1), which the contract admits: contract: invalid event: payload.paymentStatus: unknown value "Chargeback"`)
	require.Contains(t, strings.Join(got["other-contract-versions"], "\n"), "which the contract admits: contract: invalid event: contractVersion: must be 1")
	require.Contains(t, strings.Join(got["unknown-enum-values"], "\n"), "{purchase A ")
	require.Contains(t, strings.Join(got["unknown-enum-values"], "\n"), ", Active, v1} never performed (want once)")
}

// TestCheckDeliveredMatchesByVersionAndHoldsReversals: judged as the
// scenarios are, a pipeline's effects at another version, or a refund
// before its charge, break the contract.
func TestCheckDeliveredMatchesByVersionAndHoldsReversals(t *testing.T) {
	t.Parallel()
	a1 := event(t, contract.StatusActive, 1)
	a2 := event(t, contract.StatusCancelled, 2, a1)
	id := a1.Payload.PurchaseID
	observing := func(effects ...contracttest.Effect) contracttest.Consumer {
		return contracttest.Consumer{EffectOn: []contract.Status{contract.StatusActive},
			Observe: func(context.Context) (contracttest.Observation, error) {
				return contracttest.Observation{Effects: effects}, nil
			}}
	}
	charge := contracttest.Effect{PurchaseID: id, Status: contract.StatusActive, Version: 1}
	refund := contracttest.Effect{PurchaseID: id, Status: contract.StatusCancelled, Version: 2, Kind: contracttest.KindReversal}
	made := []contract.Envelope{a1, a2}
	require.Empty(t, contracttest.CheckDelivered(context.Background(), observing(charge, refund), made))
	require.Empty(t, contracttest.CheckDelivered(context.Background(), observing(charge), made), "a refund is never required")

	forged := charge
	forged.Version = 999
	got := contracttest.CheckDelivered(context.Background(), observing(forged), made)
	require.Len(t, got, 2, "%v", got)
	require.Contains(t, got[0].Message, ", Active, v999} performed, but no record the consumer had to acknowledge carries that status at that version")
	require.Contains(t, got[1].Message, ", Active, v1} never performed (want once)")

	got = contracttest.CheckDelivered(context.Background(), observing(refund, charge), made)
	require.Len(t, got, 2, "%v", got)
	require.Contains(t, got[0].Message, "performed before any effect of the purchase it could undo")
	require.Contains(t, got[1].Message, "went backwards")
}

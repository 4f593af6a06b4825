package contracttest

import (
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// Scenario is a sequence of records as the topic may hand them to a
// consumer, each purchase's in partition order; the kit knows from it what
// the contract then promises.
type Scenario struct {
	// Name says what the scenario delivers.
	Name       string
	deliveries []delivery
	labels     map[uuid.UUID]string // "purchase A", by purchase id
}

// Scenarios returns the scenarios the contract's promises are checked on,
// each with purchases and targets of its own; Run drives a consumer through
// them all.
func Scenarios() []Scenario {
	return []Scenario{
		Duplicates(), OlderAfterNewer(), SnapshotRedeliveries(), DeadLetterReplays(),
		RelayFailover(), UnknownEnumValues(), OtherContractVersions(), HostileRecords(),
	}
}

func build(name string, f func(b *builder)) Scenario {
	b := &builder{scenario: Scenario{Name: name, labels: map[uuid.UUID]string{}}}
	f(b)
	return b.scenario
}

// Duplicates delivers each event two or three times in a row, as
// at-least-once delivery may: one side effect each.
func Duplicates() Scenario {
	return build("duplicates", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		b.deliver(a, a1, a1, a1, a2, a2)
		p := b.purchase(contract.KindPostBoost, 5, post())
		p1, p2 := p.event(contract.StatusActive, 1), p.event(contract.StatusExpired, 2)
		b.deliver(p, p1, p2, p1, p2)
	})
}

// OlderAfterNewer delivers a purchase's older event after its newer one:
// a copy redelivered late, and an event seen for the first time after the
// next one (an outbox dead letter replayed after the purchase moved on).
// Nothing goes backwards: the later Active neither notifies nor revives.
func OlderAfterNewer() Scenario {
	return build("an older event after a newer one", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		b.deliver(a, a1, a2, a1)
		late := b.purchase(contract.KindProjectBoost, 7, project())
		l1, l2 := late.event(contract.StatusActive, 1), late.event(contract.StatusExpired, 2)
		b.deliver(late, l2, l1)
	})
}

// SnapshotRedeliveries delivers snapshots as `pin promotion snapshot`
// writes them: each purchase's last event again, same messageId, with
// event_origin = snapshot. To a consumer that saw the event it is a
// duplicate; a consumer that never did (it joined late, or the transition
// left the topic) rebuilds from it.
func SnapshotRedeliveries() Scenario {
	return build("redeliveries by snapshot", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		a1 := a.event(contract.StatusActive, 1)
		b.deliver(a, a1)
		b.snapshot(a, a1)
		b.snapshot(a, a1) // a second run
		c := b.purchase(contract.KindProjectBoost, 4, project())
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusCancelled, 2)
		b.deliver(c, c1, c2)
		b.snapshot(c, c2) // --include-ended
		rebuilt := b.purchase(contract.KindPostBoost, 6, post())
		b.snapshot(rebuilt, rebuilt.event(contract.StatusActive, 3)) // its transitions are gone
		ended := b.purchase(contract.KindProjectBoost, 3, project())
		b.snapshot(ended, ended.event(contract.StatusActive, 1))
		b.deliver(ended, ended.event(contract.StatusExpired, 2))
	})
}

// DeadLetterReplays delivers events again after others, as `pin outbox
// dead-letters replay` does with a copy the relay dead-lettered: the same
// messageId, another correlation_id.
func DeadLetterReplays() Scenario {
	return build("redeliveries by dead-letter replay", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		c := b.purchase(contract.KindPropertyObjectBoost, 2,
			contract.Target{TargetKind: contract.TargetPropertyObject, TargetID: uuid.New()})
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusExpired, 2)
		b.deliver(a, a1)
		b.deliver(c, c1)
		b.replay(a, a1)
		b.deliver(a, a2)
		b.deliver(c, c2)
		b.replay(c, c1)
		b.replay(a, a2)
	})
}

// replay hands e over again with a new correlation_id.
func (b *builder) replay(p *purchase, e contract.Envelope) {
	r := recordOf(e)
	b.add(delivery{record: r, what: describe(p, e) + " replayed from a dead letter", event: &e})
}

// RelayFailover delivers what two relays write around a failover: the
// frozen leader's batch sent again by its successor, and the old leader's
// in-flight sends arriving after newer events once it wakes.
func RelayFailover() Scenario {
	return build("resends after a relay failover", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		p := b.purchase(contract.KindProjectBoost, 5, project())
		c := b.purchase(contract.KindPostBoost, 3, post())
		a1, p1, c1 := a.event(contract.StatusActive, 1), p.event(contract.StatusActive, 1), c.event(contract.StatusActive, 1)
		a2, c2 := a.event(contract.StatusCancelled, 2), c.event(contract.StatusExpired, 2)
		b.deliver(a, a1)
		b.deliver(p, p1)
		b.deliver(c, c1)
		b.deliver(a, a1, a2) // the successor's resend
		b.deliver(p, p1)
		b.deliver(c, c1, c2)
		b.deliver(a, a1) // the woken leader's in-flight send
		b.deliver(c, c1)
	})
}

// UnknownEnumValues delivers values a later additive revision may write:
// an unknown payment status, package kind, target kind and status. They are
// kept and warned about, never refused; a target of an unknown kind is
// ignored, a purchase's known transitions still act.
func UnknownEnumValues() Scenario {
	return build("unknown enum values", func(b *builder) {
		paid := b.purchase(contract.KindProjectBoost, 10, project())
		e := paid.event(contract.StatusActive, 1)
		e.Payload.PaymentStatus = "Chargeback"
		b.deliver(paid, e)
		banners := b.purchase("BannerBoost", 4, banner())
		b.deliver(banners, banners.event(contract.StatusActive, 1), banners.event(contract.StatusExpired, 2))
		mixed := b.purchase(contract.KindProjectBoost, 6, project(), banner())
		b.deliver(mixed, mixed.event(contract.StatusActive, 1))
		suspended := b.purchase(contract.KindProjectBoost, 8, project())
		b.deliver(suspended, suspended.event(contract.StatusActive, 1), suspended.event("Suspended", 2),
			suspended.event(contract.StatusExpired, 3))
	})
}

// OtherContractVersions delivers events of contractVersion 2 with fields
// version 1 does not know: warned about, applied as version 1.
func OtherContractVersions() Scenario {
	return build("unknown contract versions and fields", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		for _, e := range []contract.Envelope{a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)} {
			e.ContractVersion = 2
			r := withFields(recordOf(e), map[string]any{"schemaUrl": "https://example.com/v2"},
				map[string]any{"packageName": "Неделя проекта", "regions": []string{"77"}})
			b.add(delivery{record: r, what: describe(a, e) + " of contractVersion 2", event: &e})
		}
	})
}

// HostileRecords delivers records no revision of the contract writes, each
// claiming either a purchase the consumer applied (at a version that would
// cancel it) or a new purchase boosting the same target. Each is refused
// naming the rule it broke, none acts, and the purchase's next genuine
// event still applies.
func HostileRecords() Scenario {
	return build("hostile records", func(b *builder) {
		target := project()
		a := b.purchase(contract.KindProjectBoost, 10, target)
		b.deliver(a, a.event(contract.StatusActive, 1))
		madeUp := b.purchase(contract.KindProjectBoost, 10, target)
		cancel := func(version int64, spoil func(e *contract.Envelope)) contract.Envelope {
			e := a.event(contract.StatusCancelled, version)
			spoil(&e)
			return e
		}
		activate := func(spoil func(e *contract.Envelope)) contract.Envelope {
			e := madeUp.event(contract.StatusActive, 1)
			spoil(&e)
			return e
		}
		withEvent := func(what string, e contract.Envelope, rules ...string) {
			b.hostile(what, recordOf(e), &e, rules...)
		}
		many := func(n int) []contract.Target {
			ts := make([]contract.Target, n)
			ts[0] = target
			for i := 1; i < n; i++ {
				ts[i] = project()
			}
			return ts
		}
		withEvent("5000 targets", activate(func(e *contract.Envelope) { e.Payload.Targets = many(5000) }), "targets")
		withEvent("11 targets", activate(func(e *contract.Envelope) { e.Payload.Targets = many(11) }), "targets")
		withEvent("no targets, at version 999", cancel(999, func(e *contract.Envelope) { e.Payload.Targets = nil }), "targets")
		withEvent("version 0", activate(func(e *contract.Envelope) { e.Payload.Version = 0 }), "version")
		withEvent("version -3", cancel(-3, func(*contract.Envelope) {}), "version")
		withEvent("a nil targetId", activate(func(e *contract.Envelope) {
			e.Payload.Targets = []contract.Target{target, {TargetKind: contract.TargetProject}}
		}), "targetId")
		withEvent("the same target twice", activate(func(e *contract.Envelope) {
			e.Payload.Targets = []contract.Target{target, target}
		}), "targets")
		withEvent("an empty status, at version 999", cancel(999, func(e *contract.Envelope) { e.Payload.Status = "" }), "status")
		withEvent("an empty target kind", activate(func(e *contract.Envelope) {
			e.Payload.Targets = []contract.Target{{TargetID: target.TargetID}}
		}), "targetKind")
		withEvent("boostWeight 0", activate(func(e *contract.Envelope) { e.Payload.BoostWeight = 0 }), "boostWeight")
		withEvent("a nil tenantId", activate(func(e *contract.Envelope) { e.Payload.TenantID = uuid.Nil }), "tenantId")
		withEvent("a negative amount", activate(func(e *contract.Envelope) {
			e.Payload.Price.Amount = contract.NewAmount(e.Payload.Price.Amount.Neg())
		}), "amount")
		withEvent("endsAt before startsAt", activate(func(e *contract.Envelope) {
			e.Payload.EndsAt = e.Payload.StartsAt.Add(-time.Hour)
		}), "endsAt")
		withEvent("another event type", activate(func(e *contract.Envelope) { e.EventType = "pin.promotion.something-else" }),
			"event type", "eventType")

		spoilt := func(what string, e contract.Envelope, spoil func(r *contract.Record)) {
			r := recordOf(e)
			spoil(&r)
			b.hostile(what, r, &e)
		}
		spoilt("a value that is not JSON", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) { r.Value = []byte("not json") })
		spoilt("an empty value", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) { r.Value = nil })
		spoilt("bytes that are not UTF-8 and a NUL in a header", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			r.Value, r.Headers["note"] = []byte{0xff, 0xfe, 0x00, '{'}, "a\x00b"
		})
		spoilt("a key that is another purchase", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			r.Key = []byte(uuid.NewString())
		})
		spoilt("no message_id header", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			delete(r.Headers, contract.HeaderMessageID)
		})
		b.deliver(a, a.event(contract.StatusCancelled, 2))
	})
}

// LegacySnapshot is the snapshot as main wrote it before it became a
// redelivery: each purchase's state at its version again, under a new
// messageId. A consumer that deduplicates by messageId alone, as the
// contract says billing does, takes it as a new event; so it is not among
// Scenarios, and a consumer that keeps the contract may fail it.
func LegacySnapshot() Scenario {
	return build("legacy snapshot (a new messageId)", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, project())
		a1 := a.event(contract.StatusActive, 1)
		b.deliver(a, a1)
		b.legacySnapshot(a, a1)
		c := b.purchase(contract.KindProjectBoost, 5, project())
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusCancelled, 2)
		b.deliver(c, c1, c2)
		b.legacySnapshot(c, c2)
	})
}

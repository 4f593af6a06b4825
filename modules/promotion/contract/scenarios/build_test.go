package scenarios

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// The scenarios are data (*.json); this file is how they are written. `go test -run TestScenarioFilesAreTheBuilders -update` rewrites
// them after a change here.

var update = flag.Bool("update", false, "rewrite *.json from the builders")

// builders are the scenarios in the order of their files.
var builders = []struct {
	file  string
	build func() Scenario
}{
	{"01-duplicates.json", duplicates},
	{"02-older-after-newer.json", olderAfterNewer},
	{"03-snapshot-redeliveries.json", snapshotRedeliveries},
	{"04-dead-letter-replays.json", deadLetterReplays},
	{"05-relay-failover.json", relayFailover},
	{"06-unknown-enum-values.json", unknownEnumValues},
	{"07-other-contract-versions.json", otherContractVersions},
	{"08-hostile-records.json", hostileRecords},
	{"09-cancelled-without-activation.json", cancelledWithoutActivation},
	{"10-steady-stream.json", steadyStream},
	{"90-legacy-snapshot.json", legacySnapshot},
}

// TestScenarioFilesAreTheBuilders holds the embedded files equal to what
// the builders write, each effect list equal to what its records imply, and
// every admitted record decodable by the contract.
func TestScenarioFilesAreTheBuilders(t *testing.T) {
	for _, b := range builders {
		s := b.build()
		data := encodeScenario(t, s)
		file := b.file
		if *update {
			require.NoError(t, os.WriteFile(file, data, 0o644))
		}
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, string(data), string(got), "%s: run go test -run TestScenarioFilesAreTheBuilders -update", file)
	}
	require.Len(t, all, len(builders), "every file is a builder's")
	for _, s := range all {
		require.Equal(t, AllowedEffects(s.Records), s.Effects, s.Name)
		for _, r := range s.Records {
			if r.Refuse == nil {
				_, err := contract.DecodeRecord(r.Record(), slog.New(slog.DiscardHandler))
				require.NoError(t, err, "%s: %s", s.Name, r.What)
			}
		}
	}
}

func encodeScenario(t *testing.T, s Scenario) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(s))
	return buf.Bytes()
}

// builder assembles a scenario: its purchases and the records in the order
// the topic hands them over. Its ids are derived from the scenario's name,
// so the files are the same at every -update; Fresh replaces them at run
// time.
type builder struct {
	scenario Scenario
	ids      int
}

func build(name, about string, f func(b *builder)) Scenario {
	b := &builder{scenario: Scenario{Name: name, About: about}}
	f(b)
	b.scenario.Effects = AllowedEffects(b.scenario.Records)
	return b.scenario
}

// id is the scenario's next id.
func (b *builder) id() uuid.UUID {
	b.ids++
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://pin/contract/scenarios/"+b.scenario.Name+"/"+strconv.Itoa(b.ids)))
}

// purchase is one purchase of a scenario, as the producer would announce it.
type purchase struct {
	b       *builder
	label   string
	payload contract.PurchaseChanged
}

// purchase adds a purchase of kind with weight and targets, labelled A, B…
// (AA after Z) in the order of creation.
func (b *builder) purchase(kind contract.PackageKind, weight int, targets ...contract.Target) *purchase {
	n := len(b.scenario.Purchases)
	label := string(rune('A' + n%26))
	if n >= 26 { // AA, AB… past Z
		label = string(rune('A'+n/26-1)) + label
	}
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	id := b.id()
	b.scenario.Purchases = append(b.scenario.Purchases, Purchase{Label: label, ID: id})
	return &purchase{b: b, label: label, payload: contract.PurchaseChanged{
		PurchaseID:    id,
		TenantID:      b.id(),
		PackageID:     b.id(),
		PackageCode:   "conformance-kit",
		PackageKind:   kind,
		Targets:       targets,
		Status:        contract.StatusActive,
		PaymentStatus: contract.PaymentNotRequired,
		BoostWeight:   weight,
		StartsAt:      start,
		EndsAt:        start.Add(7 * 24 * time.Hour),
		Price: contract.Price{Amount: contract.NewAmount(decimal.RequireFromString("1500.00")),
			CurrencyID: contract.CurrencyIDRUB, Currency: contract.RUBCurrency()},
	}}
}

// project, post and a target of a kind contract version 1 does not know.
func (b *builder) project() contract.Target {
	return contract.Target{TargetKind: contract.TargetProject, TargetID: b.id()}
}
func (b *builder) post() contract.Target {
	return contract.Target{TargetKind: contract.TargetPost, TargetID: b.id()}
}
func (b *builder) banner() contract.Target {
	return contract.Target{TargetKind: "Banner", TargetID: b.id()}
}

// event is p's event of status at version, under a new messageId.
func (p *purchase) event(status contract.Status, version int64) contract.Envelope {
	payload := p.payload
	payload.Status, payload.Version = status, version
	return contract.NewEnvelope(payload, p.b.id(), payload.StartsAt.Add(time.Duration(version)*time.Hour))
}

// describe names e's purchase and transition in failures.
func describe(p *purchase, e contract.Envelope) string {
	return fmt.Sprintf("purchase %s's %s (version %d)", p.label, e.Payload.Status, e.Payload.Version)
}

// deliver hands over e's record as the relay writes it for a transition.
func (b *builder) deliver(p *purchase, events ...contract.Envelope) {
	for _, e := range events {
		b.add(b.recordOf(e), describe(p, e), &e, false, nil)
	}
}

// snapshot hands over e again as `pin promotion snapshot` redelivers it: the
// same messageId and value, the header event_origin = snapshot and the
// snapshot's correlation_id.
func (b *builder) snapshot(p *purchase, e contract.Envelope) {
	r := b.recordOf(e)
	r.Headers[contract.HeaderEventOrigin] = contract.EventOriginSnapshot
	b.add(r, describe(p, e)+" redelivered by a snapshot", &e, true, nil)
}

// replay hands e over again as `pin outbox dead-letters replay` sends a
// dead letter: the same messageId and value, another correlation_id.
func (b *builder) replay(p *purchase, e contract.Envelope) {
	b.add(b.recordOf(e), describe(p, e)+" replayed from a dead letter", &e, false, nil)
}

// legacySnapshot is what `pin promotion snapshot` wrote before it became a
// redelivery: the purchase's state at its version under a new messageId.
func (b *builder) legacySnapshot(p *purchase, e contract.Envelope) {
	e.MessageID = b.id()
	r := b.recordOf(e)
	r.Headers[contract.HeaderEventOrigin] = contract.EventOriginSnapshot
	b.add(r, describe(p, e)+" in a legacy snapshot (a new messageId)", &e, true, nil)
}

// hostile hands over a record the consumer must refuse, naming one of the
// rules; e is the event it pretends to carry, if any.
func (b *builder) hostile(what string, r contract.Record, e *contract.Envelope, rules ...string) {
	if rules == nil {
		rules = []string{}
	}
	b.add(r, "a record with "+what, e, false, &Refusal{Naming: rules})
}

func (b *builder) add(r contract.Record, what string, e *contract.Envelope, snapshot bool, refuse *Refusal) {
	sr := ScenarioRecord{What: what, Key: string(r.Key), Headers: r.Headers, Snapshot: snapshot, Refuse: refuse}
	if utf8.Valid(r.Value) {
		sr.Value = string(r.Value)
	} else {
		sr.ValueBase64 = r.Value
	}
	if e != nil {
		sr.Event = &EventRef{PurchaseID: e.Payload.PurchaseID, Status: e.Payload.Status, Version: e.Payload.Version}
	}
	b.scenario.Records = append(b.scenario.Records, sr)
}

// recordOf lays e out as the outbox relay does, without validating it: key =
// purchase id, the message_id, event_type, contract_version and
// correlation_id headers, the value as the contract encodes it.
func (b *builder) recordOf(e contract.Envelope) contract.Record {
	value, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("scenarios: encode an event: %v", err)) // every event the kit builds encodes
	}
	return contract.Record{
		Key: []byte(e.AggregateID.String()),
		Headers: map[string]string{
			contract.HeaderMessageID:       e.MessageID.String(),
			contract.HeaderEventType:       e.EventType,
			contract.HeaderContractVersion: strconv.Itoa(e.ContractVersion),
			contract.HeaderCorrelationID:   b.id().String(),
		},
		Value: value,
	}
}

// withFields adds fields to the envelope's and the payload's JSON, as a
// later additive revision of the contract would.
func withFields(r contract.Record, envelope, payload map[string]any) contract.Record {
	d := json.NewDecoder(bytes.NewReader(r.Value))
	d.UseNumber() // the amount stays 1500.00
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		panic(fmt.Sprintf("scenarios: %v", err))
	}
	for k, v := range envelope {
		doc[k] = v
	}
	p := doc["payload"].(map[string]any)
	for k, v := range payload {
		p[k] = v
	}
	value, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("scenarios: %v", err))
	}
	r.Value = value
	return r
}

func duplicates() Scenario {
	return build("duplicates", "Each event two or three times in a row, as at-least-once delivery may: one side effect each.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		b.deliver(a, a1, a1, a1, a2, a2)
		p := b.purchase(contract.KindPostBoost, 5, b.post())
		p1, p2 := p.event(contract.StatusActive, 1), p.event(contract.StatusExpired, 2)
		b.deliver(p, p1, p2, p1, p2)
	})
}

func olderAfterNewer() Scenario {
	return build("older-after-newer", "A purchase's older event after its newer one: a copy redelivered late (the same messageId), "+
		"and an event seen for the first time after the next one (written before the relay kept each purchase in version order). "+
		"Nothing goes backwards: no effect for an event first seen after the next one (the version guard skips it), none after one of a higher version, "+
		"a refund never before its charge; a projection keeps the newer state.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		b.deliver(a, a1, a2, a1)
		late := b.purchase(contract.KindProjectBoost, 7, b.project())
		l1, l2 := late.event(contract.StatusActive, 1), late.event(contract.StatusExpired, 2)
		b.deliver(late, l2, l1)
	})
}

func snapshotRedeliveries() Scenario {
	return build("snapshot-redeliveries", "Snapshots as `pin promotion snapshot` writes them: each purchase's last event again, same messageId, "+
		"event_origin = snapshot. A duplicate to a consumer that saw the event; a consumer that never did rebuilds from it.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		a1 := a.event(contract.StatusActive, 1)
		b.deliver(a, a1)
		b.snapshot(a, a1)
		b.snapshot(a, a1) // a second run
		c := b.purchase(contract.KindProjectBoost, 4, b.project())
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusCancelled, 2)
		b.deliver(c, c1, c2)
		b.snapshot(c, c2) // --include-ended
		rebuilt := b.purchase(contract.KindPostBoost, 6, b.post())
		b.snapshot(rebuilt, rebuilt.event(contract.StatusActive, 3)) // its transitions are gone
		ended := b.purchase(contract.KindProjectBoost, 3, b.project())
		b.snapshot(ended, ended.event(contract.StatusActive, 1))
		b.deliver(ended, ended.event(contract.StatusExpired, 2))
	})
}

// deadLetterReplays is what the relay writes around a dead letter since it
// keeps each purchase in version order: a dead-lettered record's later
// records wait behind it, and the replay sends it then them. A purchase's
// versions never go out of order; a replay may be a duplicate (the broker
// took the first send but its answer was lost).
func deadLetterReplays() Scenario {
	return build("dead-letter-replays", "What the relay writes around a dead letter and `pin outbox dead-letters replay`: the replayed record "+
		"in its place, its purchase's later records behind it, in version order; a replay of a record the broker had taken after all "+
		"is a redelivery (same messageId, another correlation_id). One side effect each.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		c := b.purchase(contract.KindPropertyObjectBoost, 2,
			contract.Target{TargetKind: contract.TargetPropertyObject, TargetID: b.id()})
		o := b.purchase(contract.KindPostBoost, 4, b.post())
		a1, a2 := a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusExpired, 2)
		o1 := o.event(contract.StatusActive, 1)
		b.deliver(a, a1) // taken, but the answer was lost: dead-lettered
		// c1 is refused by the broker and dead-lettered; c2 waits behind it,
		// while other purchases go on.
		b.deliver(o, o1)
		b.replay(a, a1) // the replay: a1 again, then what waited behind it
		b.deliver(a, a2)
		b.replay(c, c1)
		b.deliver(c, c2)
	})
}

func relayFailover() Scenario {
	return build("relay-failover", "What two relays write around a failover: the frozen leader's batch sent again by its successor, "+
		"and the old leader's in-flight sends arriving after newer events once it wakes (copies: the same messageId). One side effect each.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		p := b.purchase(contract.KindProjectBoost, 5, b.project())
		c := b.purchase(contract.KindPostBoost, 3, b.post())
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

func unknownEnumValues() Scenario {
	return build("unknown-enum-values", "Values a later additive revision may write: paymentStatus Chargeback, packageKind BannerBoost, "+
		"a Banner target, status Suspended. Kept and warned about, never refused; a target of an unknown kind counts for nothing, "+
		"a purchase's known transitions still act.", func(b *builder) {
		paid := b.purchase(contract.KindProjectBoost, 10, b.project())
		e := paid.event(contract.StatusActive, 1)
		e.Payload.PaymentStatus = "Chargeback"
		b.deliver(paid, e)
		banners := b.purchase("BannerBoost", 4, b.banner())
		b.deliver(banners, banners.event(contract.StatusActive, 1), banners.event(contract.StatusExpired, 2))
		mixed := b.purchase(contract.KindProjectBoost, 6, b.project(), b.banner())
		b.deliver(mixed, mixed.event(contract.StatusActive, 1))
		suspended := b.purchase(contract.KindProjectBoost, 8, b.project())
		b.deliver(suspended, suspended.event(contract.StatusActive, 1), suspended.event("Suspended", 2),
			suspended.event(contract.StatusExpired, 3))
	})
}

func otherContractVersions() Scenario {
	return build("other-contract-versions", "Events of contractVersion 2 with fields version 1 does not know: warned about, applied as version 1.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		for _, e := range []contract.Envelope{a.event(contract.StatusActive, 1), a.event(contract.StatusCancelled, 2)} {
			e.ContractVersion = 2
			r := withFields(b.recordOf(e), map[string]any{"schemaUrl": "https://example.com/v2"},
				map[string]any{"packageName": "Неделя проекта", "regions": []string{"77"}})
			b.add(r, describe(a, e)+" of contractVersion 2", &e, false, nil)
		}
	})
}

func hostileRecords() Scenario {
	return build("hostile-records", "Records no revision of the contract writes, each claiming either a purchase the consumer applied "+
		"(at a version that would cancel it) or a new purchase boosting the same target: each refused (dead-lettered) naming the rule "+
		"it broke, none acts, and the purchase's next genuine event still acts.", func(b *builder) {
		target := b.project()
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
			b.hostile(what, b.recordOf(e), &e, rules...)
		}
		many := func(n int) []contract.Target {
			ts := make([]contract.Target, n)
			ts[0] = target
			for i := 1; i < n; i++ {
				ts[i] = b.project()
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
		// One a row of the contract page's bounds table each, so the table and the kit agree.
		withEvent("a packageCode that is not kebab-case", activate(func(e *contract.Envelope) { e.Payload.PackageCode = "Not A Code" }), "packageCode")
		withEvent("contractVersion 0", activate(func(e *contract.Envelope) { e.ContractVersion = 0 }), "contractVersion")
		withEvent("a nil packageId", activate(func(e *contract.Envelope) { e.Payload.PackageID = uuid.Nil }), "packageId")
		withEvent("an amount with three decimals", activate(func(e *contract.Envelope) {
			e.Payload.Price.Amount = contract.NewAmount(decimal.RequireFromString("1500.005"))
		}), "amount")
		withEvent("currencyId 840", activate(func(e *contract.Envelope) { e.Payload.Price.CurrencyID = 840 }), "currencyId")
		withEvent("an empty paymentStatus", activate(func(e *contract.Envelope) { e.Payload.PaymentStatus = "" }), "paymentStatus")
		withEvent("an empty packageKind", activate(func(e *contract.Envelope) { e.Payload.PackageKind = "" }), "packageKind")

		spoilt := func(what string, e contract.Envelope, spoil func(r *contract.Record)) {
			r := b.recordOf(e)
			spoil(&r)
			b.hostile(what, r, &e)
		}
		spoilt("a value that is not JSON", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) { r.Value = []byte("not json") })
		spoilt("an empty value", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) { r.Value = nil })
		spoilt("bytes that are not UTF-8 and a NUL in a header", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			r.Value, r.Headers["note"] = []byte{0xff, 0xfe, 0x00, '{'}, "a\x00b"
		})
		spoilt("a key that is another purchase", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			r.Key = []byte(b.id().String())
		})
		spoilt("no message_id header", cancel(2, func(*contract.Envelope) {}), func(r *contract.Record) {
			delete(r.Headers, contract.HeaderMessageID)
		})
		b.deliver(a, a.event(contract.StatusCancelled, 2))
	})
}

// cancelledWithoutActivation is what a consumer sees of a purchase whose
// Active left the topic before it started (the contract promises what is
// within retention), or that was cancelled while Pending: its Cancelled alone.
func cancelledWithoutActivation() Scenario {
	return build("cancelled-without-activation", "A purchase's Cancelled (version 2) whose Active (version 1) never comes: "+
		"the consumer started after the topic's retention removed it, or the purchase was cancelled while Pending. "+
		"Nothing of it to undo: no refund; its cancellation still acts. Beside it, a purchase whose Active and Cancelled both come.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		b.deliver(a, a.event(contract.StatusCancelled, 2))
		c := b.purchase(contract.KindPostBoost, 4, b.post())
		b.deliver(c, c.event(contract.StatusActive, 1), c.event(contract.StatusCancelled, 2))
	})
}

// steadyStream is a busy stretch of the topic: enough records in a row that
// a consumer whose offsets are committed on a timer (librdkafka's default:
// every 5 s, of what was polled) commits while a write is still under way.
func steadyStream() Scenario {
	return build("steady-stream", "32 activations in a row, as on a busy day: long enough that a consumer whose offsets are committed "+
		"on a timer (librdkafka's default: every 5 s, of what was polled) commits while a write is under way. Each acts once, "+
		"and no record is committed before its effect is visible: a crash right after that commit would lose it.", func(b *builder) {
		for i := range 32 {
			kind, target := contract.KindProjectBoost, b.project()
			if i%2 == 1 {
				kind, target = contract.KindPostBoost, b.post()
			}
			p := b.purchase(kind, 1+i%10, target)
			b.deliver(p, p.event(contract.StatusActive, 1))
		}
	})
}

func legacySnapshot() Scenario {
	s := build("legacy-snapshot", "The snapshot as main wrote it before it became a redelivery: each purchase's state at its version "+
		"again, under a new messageId. Kept out of the scenarios run by default: a consumer that deduplicates by messageId alone, "+
		"as the contract says billing does, takes it as a new event.", func(b *builder) {
		a := b.purchase(contract.KindProjectBoost, 10, b.project())
		a1 := a.event(contract.StatusActive, 1)
		b.deliver(a, a1)
		b.legacySnapshot(a, a1)
		c := b.purchase(contract.KindProjectBoost, 5, b.project())
		c1, c2 := c.event(contract.StatusActive, 1), c.event(contract.StatusCancelled, 2)
		b.deliver(c, c1, c2)
		b.legacySnapshot(c, c2)
	})
	s.Legacy = true
	return s
}

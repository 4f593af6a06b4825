package contracttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// delivery is one record handed to the consumer and what the contract asks
// of it.
type delivery struct {
	record contract.Record
	// what names the record in a failure: "purchase A's Active (version 1)".
	what string
	// event is the event the record carries, or the one it pretends to
	// carry; nil when there is none (the value is not an envelope).
	event *contract.Envelope
	// snapshot is set for a record of `pin promotion snapshot`.
	snapshot bool
	// refuse is nil for a record the consumer must acknowledge; otherwise it
	// must refuse it, with an error naming one of these rules (any error
	// when empty).
	refuse []string
}

// builder assembles a scenario: its purchases and the records in the order
// the topic hands them over.
type builder struct {
	scenario Scenario
}

// purchase is one purchase of a scenario, as the producer would announce it.
type purchase struct {
	label   string
	payload contract.PurchaseChanged
}

// purchase adds a purchase of kind with weight and targets, labelled A, B…
// in the order of creation.
func (b *builder) purchase(kind contract.PackageKind, weight int, targets ...contract.Target) *purchase {
	label := string(rune('A' + len(b.scenario.labels)))
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	id := uuid.New()
	b.scenario.labels[id] = "purchase " + label
	return &purchase{label: label, payload: contract.PurchaseChanged{
		PurchaseID:    id,
		TenantID:      uuid.New(),
		PackageID:     uuid.New(),
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
func project() contract.Target {
	return contract.Target{TargetKind: contract.TargetProject, TargetID: uuid.New()}
}
func post() contract.Target {
	return contract.Target{TargetKind: contract.TargetPost, TargetID: uuid.New()}
}
func banner() contract.Target { return contract.Target{TargetKind: "Banner", TargetID: uuid.New()} }

// event is p's event of status at version, under a new messageId.
func (p *purchase) event(status contract.Status, version int64) contract.Envelope {
	payload := p.payload
	payload.Status, payload.Version = status, version
	return contract.NewEnvelope(payload, uuid.New(), payload.StartsAt.Add(time.Duration(version)*time.Hour))
}

// label names e's purchase in failures.
func describe(p *purchase, e contract.Envelope) string {
	return fmt.Sprintf("purchase %s's %s (version %d)", p.label, e.Payload.Status, e.Payload.Version)
}

// deliver hands over e's record as the relay writes it for a transition.
func (b *builder) deliver(p *purchase, events ...contract.Envelope) {
	for _, e := range events {
		b.add(delivery{record: recordOf(e), what: describe(p, e), event: &e})
	}
}

// snapshot hands over e again as `pin promotion snapshot` redelivers it: the
// same messageId and value, the header event_origin = snapshot and the
// snapshot's correlation_id.
func (b *builder) snapshot(p *purchase, e contract.Envelope) {
	r := recordOf(e)
	r.Headers[contract.HeaderEventOrigin] = contract.EventOriginSnapshot
	b.add(delivery{record: r, what: describe(p, e) + " redelivered by a snapshot", event: &e, snapshot: true})
}

// legacySnapshot is what `pin promotion snapshot` wrote before it became a
// redelivery: the purchase's state at its version under a new messageId.
func (b *builder) legacySnapshot(p *purchase, e contract.Envelope) {
	e.MessageID = uuid.New()
	r := recordOf(e)
	r.Headers[contract.HeaderEventOrigin] = contract.EventOriginSnapshot
	b.add(delivery{record: r, what: describe(p, e) + " in a legacy snapshot (a new messageId)", event: &e, snapshot: true})
}

// hostile hands over a record the consumer must refuse, naming one of the
// rules; e is the event it pretends to carry, if any.
func (b *builder) hostile(what string, r contract.Record, e *contract.Envelope, rules ...string) {
	if rules == nil {
		rules = []string{}
	}
	b.add(delivery{record: r, what: "a record with " + what, event: e, refuse: rules})
}

func (b *builder) add(d delivery) { b.scenario.deliveries = append(b.scenario.deliveries, d) }

// recordOf lays e out as the outbox relay does, without validating it: key =
// purchase id, the message_id, event_type, contract_version and
// correlation_id headers, the value as the contract encodes it.
func recordOf(e contract.Envelope) contract.Record {
	value, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("contracttest: encode an event: %v", err)) // every event the kit builds encodes
	}
	return contract.Record{
		Key: []byte(e.AggregateID.String()),
		Headers: map[string]string{
			contract.HeaderMessageID:       e.MessageID.String(),
			contract.HeaderEventType:       e.EventType,
			contract.HeaderContractVersion: strconv.Itoa(e.ContractVersion),
			contract.HeaderCorrelationID:   uuid.NewString(),
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
		panic(fmt.Sprintf("contracttest: %v", err))
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
		panic(fmt.Sprintf("contracttest: %v", err))
	}
	r.Value = value
	return r
}

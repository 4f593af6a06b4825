package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// Marshal validates e and returns the record value: compact UTF-8 JSON with
// the fields in contract order, times as RFC 3339 UTC with microseconds and
// the amount as a number with two decimals.
func Marshal(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("contract.Marshal: %w", err)
	}
	// The wire form is encoded in one pass: encoding/json validates and
	// re-compacts the output of every MarshalJSON it meets, which through
	// Envelope.MarshalJSON and PurchaseChanged.MarshalJSON cost as much as
	// the encoding itself (docs/performance.md).
	b, err := json.Marshal(e.wire())
	if err != nil {
		return nil, fmt.Errorf("contract.Marshal: %w", err)
	}
	return b, nil
}

// Decode reads a record value on the consumer side. It follows the
// compatibility rules of the contract: an enum value it does not know is kept
// as the string received and logged at warning level; a contractVersion, an
// eventType or an aggregateType other than this contract's is logged at
// warning level and decoding goes on; fields it does not know are ignored. A
// missing or null required field, or a field of the wrong JSON type, is an
// error. Decode does not re-check the producer's invariants (target count,
// nil ids and the like): call Validate for that. A nil logger means
// slog.Default().
func Decode(data []byte, logger *slog.Logger) (Envelope, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return Envelope{}, fmt.Errorf("contract.Decode: %w", err)
	}
	warn := func(msg, field, value string) {
		logger.Warn(msg,
			slog.String("topic", Topic),
			slog.String("message_id", e.MessageID.String()),
			slog.String("field", field),
			slog.String("value", value))
	}
	if e.ContractVersion != ContractVersion {
		warn("event of another contract version, decoding as version 1", "contractVersion", fmt.Sprint(e.ContractVersion))
	}
	if e.EventType != EventType {
		warn("unexpected event type", "eventType", e.EventType)
	}
	if e.AggregateType != AggregateType {
		warn("unexpected aggregate type", "aggregateType", e.AggregateType)
	}
	p := e.Payload
	if !p.PackageKind.Known() {
		warn("unknown enum value kept as is", "payload.packageKind", string(p.PackageKind))
	}
	for i, t := range p.Targets {
		if !t.TargetKind.Known() {
			warn("unknown enum value kept as is", fmt.Sprintf("payload.targets[%d].targetKind", i), string(t.TargetKind))
		}
	}
	if !p.Status.Known() {
		warn("unknown enum value kept as is", "payload.status", string(p.Status))
	}
	if !p.PaymentStatus.Known() {
		warn("unknown enum value kept as is", "payload.paymentStatus", string(p.PaymentStatus))
	}
	return e, nil
}

// envelopeOut is the wire form written by MarshalJSON; field order is the
// contract's.
type envelopeOut struct {
	MessageID       uuid.UUID          `json:"messageId"`
	EventType       string             `json:"eventType"`
	ContractVersion int                `json:"contractVersion"`
	OccurredAt      string             `json:"occurredAt"`
	AggregateID     uuid.UUID          `json:"aggregateId"`
	AggregateType   string             `json:"aggregateType"`
	Payload         purchaseChangedOut `json:"payload"`
}

// MarshalJSON writes the envelope in the contract's wire form without
// validating it (Marshal validates), so a consumer can re-encode an event it
// decoded, unknown enum values included.
func (e Envelope) MarshalJSON() ([]byte, error) {
	return json.Marshal(e.wire())
}

func (e Envelope) wire() envelopeOut {
	return envelopeOut{
		MessageID:       e.MessageID,
		EventType:       e.EventType,
		ContractVersion: e.ContractVersion,
		OccurredAt:      formatTime(e.OccurredAt),
		AggregateID:     e.AggregateID,
		AggregateType:   e.AggregateType,
		Payload:         e.Payload.wire(),
	}
}

// purchaseChangedOut is the wire form of the payload.
type purchaseChangedOut struct {
	PurchaseID    uuid.UUID     `json:"purchaseId"`
	TenantID      uuid.UUID     `json:"tenantId"`
	PackageID     uuid.UUID     `json:"packageId"`
	PackageCode   string        `json:"packageCode"`
	PackageKind   PackageKind   `json:"packageKind"`
	Targets       []Target      `json:"targets"`
	Status        Status        `json:"status"`
	PaymentStatus PaymentStatus `json:"paymentStatus"`
	BoostWeight   int           `json:"boostWeight"`
	StartsAt      string        `json:"startsAt"`
	EndsAt        string        `json:"endsAt"`
	Price         Price         `json:"price"`
	Version       int64         `json:"version"`
}

// MarshalJSON writes the payload in the contract's wire form. Nil targets are
// written as [] so the field is always an array.
func (p PurchaseChanged) MarshalJSON() ([]byte, error) {
	return json.Marshal(p.wire())
}

func (p PurchaseChanged) wire() purchaseChangedOut {
	targets := p.Targets
	if targets == nil {
		targets = []Target{}
	}
	return purchaseChangedOut{
		PurchaseID:    p.PurchaseID,
		TenantID:      p.TenantID,
		PackageID:     p.PackageID,
		PackageCode:   p.PackageCode,
		PackageKind:   p.PackageKind,
		Targets:       targets,
		Status:        p.Status,
		PaymentStatus: p.PaymentStatus,
		BoostWeight:   p.BoostWeight,
		StartsAt:      formatTime(p.StartsAt),
		EndsAt:        formatTime(p.EndsAt),
		Price:         p.Price,
		Version:       p.Version,
	}
}

// The *In types mirror the wire form with pointers, so that a missing or
// null field can be told apart from a zero value.

type envelopeIn struct {
	MessageID       *string            `json:"messageId"`
	EventType       *string            `json:"eventType"`
	ContractVersion *int               `json:"contractVersion"`
	OccurredAt      *string            `json:"occurredAt"`
	AggregateID     *string            `json:"aggregateId"`
	AggregateType   *string            `json:"aggregateType"`
	Payload         *purchaseChangedIn `json:"payload"`
}

type purchaseChangedIn struct {
	PurchaseID    *string     `json:"purchaseId"`
	TenantID      *string     `json:"tenantId"`
	PackageID     *string     `json:"packageId"`
	PackageCode   *string     `json:"packageCode"`
	PackageKind   *string     `json:"packageKind"`
	Targets       *[]targetIn `json:"targets"`
	Status        *string     `json:"status"`
	PaymentStatus *string     `json:"paymentStatus"`
	BoostWeight   *int        `json:"boostWeight"`
	StartsAt      *string     `json:"startsAt"`
	EndsAt        *string     `json:"endsAt"`
	Price         *priceIn    `json:"price"`
	Version       *int64      `json:"version"`
}

type targetIn struct {
	TargetKind *string `json:"targetKind"`
	TargetID   *string `json:"targetId"`
}

type priceIn struct {
	Amount     *Amount     `json:"amount"`
	CurrencyID *int16      `json:"currencyId"`
	Currency   *currencyIn `json:"currency"`
}

type currencyIn struct {
	IsoCode *string `json:"isoCode"`
	Name    *string `json:"name"`
	Sign    *string `json:"sign"`
}

// UnmarshalJSON reads the wire form. Every field of the contract is required
// (an error names the first one missing); unknown fields are ignored; enum
// values are taken as they come. Use Decode, which also logs the warnings the
// compatibility rules ask for.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	var in envelopeIn
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	r := &reader{}
	out := Envelope{
		MessageID:       r.uuid("messageId", in.MessageID),
		EventType:       req(r, "eventType", in.EventType),
		ContractVersion: req(r, "contractVersion", in.ContractVersion),
		OccurredAt:      r.time("occurredAt", in.OccurredAt),
		AggregateID:     r.uuid("aggregateId", in.AggregateID),
		AggregateType:   req(r, "aggregateType", in.AggregateType),
	}
	if r.present("payload", in.Payload != nil) {
		out.Payload = r.payload(*in.Payload)
	}
	if r.err != nil {
		return r.err
	}
	*e = out
	return nil
}

// reader turns the pointer mirror into contract types, keeping the first
// problem met.
type reader struct {
	err error
}

// errMissing marks a required field that is absent or null.
var errMissing = errors.New("required field is missing or null")

func (r *reader) present(field string, ok bool) bool {
	if !ok && r.err == nil {
		r.err = fmt.Errorf("contract: %s: %w", field, errMissing)
	}
	return ok
}

func req[T any](r *reader, field string, v *T) T {
	if !r.present(field, v != nil) {
		var zero T
		return zero
	}
	return *v
}

func (r *reader) fail(field, want string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("contract: %s: want %s: %w", field, want, err)
	}
}

func (r *reader) uuid(field string, s *string) uuid.UUID {
	if !r.present(field, s != nil) {
		return uuid.Nil
	}
	id, err := uuid.Parse(*s)
	if err != nil {
		r.fail(field, "a UUID", err)
		return uuid.Nil
	}
	return id
}

func (r *reader) time(field string, s *string) time.Time {
	if !r.present(field, s != nil) {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		r.fail(field, "an RFC 3339 time", err)
		return time.Time{}
	}
	return t.UTC()
}

func (r *reader) payload(in purchaseChangedIn) PurchaseChanged {
	p := PurchaseChanged{
		PurchaseID:    r.uuid("payload.purchaseId", in.PurchaseID),
		TenantID:      r.uuid("payload.tenantId", in.TenantID),
		PackageID:     r.uuid("payload.packageId", in.PackageID),
		PackageCode:   req(r, "payload.packageCode", in.PackageCode),
		PackageKind:   PackageKind(req(r, "payload.packageKind", in.PackageKind)),
		Status:        Status(req(r, "payload.status", in.Status)),
		PaymentStatus: PaymentStatus(req(r, "payload.paymentStatus", in.PaymentStatus)),
		BoostWeight:   req(r, "payload.boostWeight", in.BoostWeight),
		StartsAt:      r.time("payload.startsAt", in.StartsAt),
		EndsAt:        r.time("payload.endsAt", in.EndsAt),
		Version:       req(r, "payload.version", in.Version),
	}
	if r.present("payload.targets", in.Targets != nil) {
		p.Targets = make([]Target, len(*in.Targets))
		for i, t := range *in.Targets {
			field := fmt.Sprintf("payload.targets[%d]", i)
			p.Targets[i] = Target{
				TargetKind: TargetKind(req(r, field+".targetKind", t.TargetKind)),
				TargetID:   r.uuid(field+".targetId", t.TargetID),
			}
		}
	}
	if r.present("payload.price", in.Price != nil) {
		pr := *in.Price
		p.Price = Price{
			Amount:     req(r, "payload.price.amount", pr.Amount),
			CurrencyID: req(r, "payload.price.currencyId", pr.CurrencyID),
		}
		if r.present("payload.price.currency", pr.Currency != nil) {
			c := *pr.Currency
			p.Price.Currency = Currency{
				IsoCode: req(r, "payload.price.currency.isoCode", c.IsoCode),
				Name:    req(r, "payload.price.currency.name", c.Name),
				Sign:    req(r, "payload.price.currency.sign", c.Sign),
			}
		}
	}
	return p
}

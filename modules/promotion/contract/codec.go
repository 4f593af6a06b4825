package contract

import (
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
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
// as the string received and logged at warning level; a contractVersion or an
// aggregateType other than this contract's is logged at warning level and
// decoding goes on; fields it does not know are ignored. An eventType other
// than this contract's is an error wrapping ErrUnknownEventType, whatever the
// rest holds: the event is not this contract's. A missing or null required
// field, or a field of the wrong JSON type, is an error. Decode does not re-check the producer's invariants (target count,
// nil ids and the like): call Validate for that. A nil logger means
// slog.Default().
func Decode(data []byte, logger *slog.Logger) (Envelope, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		if t, ok := eventTypeOf(data); ok && t != EventType {
			return Envelope{}, unknownEventType(t)
		}
		return Envelope{}, fmt.Errorf("contract.Decode: %w", err)
	}
	if e.EventType != EventType {
		return Envelope{}, unknownEventType(e.EventType)
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

// eventTypeOf reads only the eventType of a value that is not this
// contract's envelope; ok is false when it has none.
func eventTypeOf(data []byte) (eventType string, ok bool) {
	var head struct {
		EventType *string `json:"eventType"`
	}
	if json.Unmarshal(data, &head) != nil || head.EventType == nil {
		return "", false
	}
	return *head.EventType, true
}

func unknownEventType(eventType string) error {
	return fmt.Errorf("contract.Decode: %w %q", ErrUnknownEventType, eventType)
}

// envelopeOut and purchaseChangedOut are the wire form written by
// MarshalJSON: Envelope and PurchaseChanged with the times as the contract's
// text (time.Time's own JSON drops trailing zeros of the fraction). They
// must list the same fields in the same order; TestWireMirrorsTheContract
// checks that.
//
// envelopeOut is the envelope's wire form.
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

// UnmarshalJSON reads the wire form. Every field of the contract is required
// (an error names the first one missing); unknown fields are ignored; enum
// values are taken as they come. Use Decode, which also logs the warnings the
// compatibility rules ask for.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	var out Envelope
	if err := decodeObject(data, reflect.ValueOf(&out).Elem(), ""); err != nil {
		return err
	}
	*e = out
	return nil
}

// errMissing marks a required field that is absent or null.
var errMissing = errors.New("required field is missing or null")

// decodeObject decodes the JSON object data into the struct v, field by
// field by their json names, so that the contract's types are the only list
// of what an event holds: a field that is absent or null is errMissing (to
// make one optional, give it omitempty). Errors name the field's JSON path.
func decodeObject(data []byte, v reflect.Value, path string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("contract: %s: %w", cmp.Or(path, "event"), err)
	}
	t := v.Type()
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		field := name
		if path != "" {
			field = path + "." + name
		}
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			if strings.Contains(opts, "omitempty") {
				continue
			}
			return fmt.Errorf("contract: %s: %w", field, errMissing)
		}
		if err := decodeValue(raw, v.Field(i), field); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue decodes one field: a struct of the contract or a slice of them
// through decodeObject, anything else (a scalar, or a type that decodes
// itself: UUID, time, Amount) through encoding/json. Times are kept in UTC.
func decodeValue(raw json.RawMessage, v reflect.Value, path string) error {
	ptr := v.Addr().Interface()
	_, self := ptr.(json.Unmarshaler)
	_, text := ptr.(encoding.TextUnmarshaler)
	switch {
	case v.Kind() == reflect.Struct && !self && !text:
		return decodeObject(raw, v, path)
	case v.Kind() == reflect.Slice:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("contract: %s: %w", path, err)
		}
		v.Set(reflect.MakeSlice(v.Type(), len(items), len(items)))
		for i, item := range items {
			if err := decodeValue(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := json.Unmarshal(raw, ptr); err != nil {
		return fmt.Errorf("contract: %s: %w", path, err)
	}
	if t, ok := ptr.(*time.Time); ok {
		*t = t.UTC()
	}
	return nil
}

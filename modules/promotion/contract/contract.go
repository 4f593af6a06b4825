package contract

import (
	"time"

	"github.com/google/uuid"
)

// Names fixed by the contract. Consumers subscribe to Topic; the other values
// are repeated in every event and in the Kafka headers so a consumer can
// route or reject a record without parsing its payload.
const (
	// Topic is the Kafka topic the event is published to. The version suffix
	// changes only with a breaking change (a new ContractVersion).
	Topic = "pin.promotion.purchase-changed.v1"
	// EventType is the envelope's eventType and the event_type header.
	EventType = "pin.promotion.purchase-changed"
	// ContractVersion is the envelope's contractVersion and the
	// contract_version header. Additive changes keep it; breaking ones bump it
	// together with the topic.
	ContractVersion = 1
	// AggregateType is the envelope's aggregateType.
	AggregateType = "PromotionPurchase"
	// MaxTargetsPerPurchase bounds payload.targets, so an event never carries
	// an unbounded collection.
	MaxTargetsPerPurchase = 10
)

// Kafka record header names. The record key is the purchase id; the headers
// below are the only ones a producer sets. platform/kafka's marshaler writes
// the same names (a platform imports no module, and this package imports no
// platform, so consumers need only it); TestHeadersAreTheMarshalers holds
// the two lists equal.
const (
	// HeaderMessageID carries the envelope's messageId, for deduplication
	// without parsing the value.
	HeaderMessageID = "message_id"
	// HeaderEventType carries EventType.
	HeaderEventType = "event_type"
	// HeaderContractVersion carries ContractVersion in decimal ("1").
	HeaderContractVersion = "contract_version"
	// HeaderCorrelationID carries the id of the operation that caused the
	// event: the HTTP request id, or the run id of an expiry cycle.
	HeaderCorrelationID = "correlation_id"
	// HeaderTraceparent carries the W3C trace context of the publication when
	// a trace was active.
	HeaderTraceparent = "traceparent"
	// HeaderEventOrigin says why the record was written: "snapshot" for a
	// record of `pin promotion snapshot` (the purchase's last event
	// redelivered: same messageId, occurredAt, version and payload);
	// "transition", or no such header, for a status transition.
	HeaderEventOrigin = "event_origin"
)

// The values of HeaderEventOrigin.
const (
	// EventOriginSnapshot marks a record of `pin promotion snapshot`: a
	// redelivery, which a consumer dedupes like any other.
	EventOriginSnapshot = "snapshot"
	// EventOriginTransition marks a status transition's record; producers
	// leave the header out instead, which means the same.
	EventOriginTransition = "transition"
)

// The only currency a price may be in (ADR-0048).
const (
	// CurrencyIDRUB is the handbook id of the Russian rouble, the only
	// currencyId the contract admits.
	CurrencyIDRUB int16 = 643
)

// RUBCurrency returns the display snapshot of the Russian rouble as the
// handbook defines it.
func RUBCurrency() Currency {
	return Currency{IsoCode: "RUB", Name: "Российский рубль", Sign: "₽"}
}

// Envelope is one event as it travels on the topic: identity and routing data
// around the payload.
type Envelope struct {
	// MessageID is unique per event and identical on a re-delivery; consumers
	// deduplicate on it. It is also the outbox message id.
	MessageID uuid.UUID `json:"messageId"`
	// EventType is always EventType.
	EventType string `json:"eventType"`
	// ContractVersion is ContractVersion for events built by this package.
	ContractVersion int `json:"contractVersion"`
	// OccurredAt is the moment of the transition (for the expiry job, the
	// cycle's AsOf), in UTC with microsecond precision.
	OccurredAt time.Time `json:"occurredAt"`
	// AggregateID equals Payload.PurchaseID and the Kafka key.
	AggregateID uuid.UUID `json:"aggregateId"`
	// AggregateType is always AggregateType.
	AggregateType string `json:"aggregateType"`
	// Payload is the snapshot of the purchase after the transition.
	Payload PurchaseChanged `json:"payload"`
}

// PurchaseChanged is the payload: a snapshot of the purchase after one status
// transition. It deliberately leaves out the cancel reason (free text), actor
// ids (personal data) and the database row version.
type PurchaseChanged struct {
	// PurchaseID identifies the purchase; it is the aggregate id and the
	// Kafka key, so events of one purchase stay in order.
	PurchaseID uuid.UUID `json:"purchaseId"`
	// TenantID is the buying company.
	TenantID uuid.UUID `json:"tenantId"`
	// PackageID is the package bought.
	PackageID uuid.UUID `json:"packageId"`
	// PackageCode is the package's stable code at purchase time, so consumers
	// can report on it without a lookup.
	PackageCode string `json:"packageCode"`
	// PackageKind is the package's kind at purchase time.
	PackageKind PackageKind `json:"packageKind"`
	// Targets are what is promoted, 1 to MaxTargetsPerPurchase, no duplicates.
	Targets []Target `json:"targets"`
	// Status is the status after the transition.
	Status Status `json:"status"`
	// PaymentStatus is NotRequired while payment is deferred.
	PaymentStatus PaymentStatus `json:"paymentStatus"`
	// BoostWeight is the package's weight at purchase time (INV-2).
	BoostWeight int `json:"boostWeight"`
	// StartsAt is when the promotion started (activation).
	StartsAt time.Time `json:"startsAt"`
	// EndsAt is when the promotion ends or ended; always after StartsAt.
	EndsAt time.Time `json:"endsAt"`
	// Price is the price at purchase time.
	Price Price `json:"price"`
	// Version is the purchase's domain version after the transition. It grows
	// with every event of one purchase: consumers apply an event only when its
	// Version is greater than the last one they applied.
	Version int64 `json:"version"`
}

// Target is one promoted object, identified in the context that owns it
// (catalog for Project and PropertyObject, news for Post).
type Target struct {
	// TargetKind says which context owns TargetID.
	TargetKind TargetKind `json:"targetKind"`
	// TargetID is never the nil UUID.
	TargetID uuid.UUID `json:"targetId"`
}

// Price is the list price of the package at purchase time, kept for future
// billing.
type Price struct {
	// Amount is at least 0 with at most two decimals (0 for a free package).
	Amount Amount `json:"amount"`
	// CurrencyID is CurrencyIDRUB.
	CurrencyID int16 `json:"currencyId"`
	// Currency is the display snapshot of the currency at publication time.
	Currency Currency `json:"currency"`
}

// Currency is the handbook's display snapshot of a currency.
type Currency struct {
	// IsoCode is the ISO 4217 letter code, e.g. RUB.
	IsoCode string `json:"isoCode"`
	// Name is the display name, e.g. Российский рубль.
	Name string `json:"name"`
	// Sign is the display sign, e.g. ₽.
	Sign string `json:"sign"`
}

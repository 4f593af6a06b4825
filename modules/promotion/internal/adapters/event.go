package adapters

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/kafka"
)

// purchaseChangedV1Message builds the contract version 1 message of the
// purchase-changed event for p's current state; occurredAt is the moment of
// the transition. The message's UUID is the event's messageId, so the outbox
// row, the Kafka message_id header and consumers see one id; the partition
// key (the purchase id) keeps one purchase's events in order.
//
// It returns an error, never panics, when p cannot be expressed in the
// contract: no targets, an unknown enum, a rule of contract.Validate. The
// expiry job relies on that to set a poison purchase aside.
func purchaseChangedV1Message(ctx context.Context, p *domain.Purchase, occurredAt time.Time, messageID uuid.UUID) (*message.Message, error) {
	payload, err := toContractPurchaseChanged(p)
	if err != nil {
		return nil, fmt.Errorf("purchase-changed event of %s: %w", p.ID(), err)
	}
	data, err := contract.Marshal(contract.NewEnvelope(payload, messageID, occurredAt))
	if err != nil {
		return nil, fmt.Errorf("purchase-changed event of %s: %w", p.ID(), err)
	}
	msg := message.NewMessage(messageID.String(), data)
	msg.Metadata.Set(kafka.MetaPartitionKey, p.ID().String())
	msg.Metadata.Set(kafka.MetaEventType, contract.EventType)
	msg.Metadata.Set(kafka.MetaContractVersion, strconv.Itoa(contract.ContractVersion))
	if id := correlation.ID(ctx); id != "" {
		msg.Metadata.Set(kafka.MetaCorrelationID, id)
	}
	return msg, nil
}

// toContractPurchaseChanged maps the purchase to the event payload. The
// enums are mapped value by value, not cast, so that a value the contract
// does not know is an error here rather than a surprise for consumers.
// Cancel reason and actor ids are left out on purpose (contract: internal
// free text and personal data).
func toContractPurchaseChanged(p *domain.Purchase) (contract.PurchaseChanged, error) {
	status, err := toContractStatus(p.Status())
	if err != nil {
		return contract.PurchaseChanged{}, err
	}
	payment, err := toContractPaymentStatus(p.PaymentStatus())
	if err != nil {
		return contract.PurchaseChanged{}, err
	}
	kind, err := toContractPackageKind(p.PackageKind())
	if err != nil {
		return contract.PurchaseChanged{}, err
	}
	domainTargets := p.Targets()
	if len(domainTargets) == 0 {
		return contract.PurchaseChanged{}, fmt.Errorf("purchase has no targets")
	}
	targets := make([]contract.Target, len(domainTargets))
	for i, t := range domainTargets {
		tk, err := toContractTargetKind(t.Kind())
		if err != nil {
			return contract.PurchaseChanged{}, fmt.Errorf("targets[%d]: %w", i, err)
		}
		targets[i] = contract.Target{TargetKind: tk, TargetID: t.ID()}
	}
	price := p.Price()
	return contract.PurchaseChanged{
		PurchaseID:    p.ID(),
		TenantID:      p.TenantID(),
		PackageID:     p.PackageID(),
		PackageCode:   p.PackageCode(),
		PackageKind:   kind,
		Targets:       targets,
		Status:        status,
		PaymentStatus: payment,
		BoostWeight:   p.BoostWeight(),
		StartsAt:      p.StartsAt(),
		EndsAt:        p.EndsAt(),
		Price: contract.Price{
			Amount:     contract.NewAmount(price.Amount()),
			CurrencyID: price.CurrencyID(),
			Currency: contract.Currency{
				IsoCode: price.Currency().IsoCode, Name: price.Currency().Name, Sign: price.Currency().Sign,
			},
		},
		Version: p.Version(),
	}, nil
}

func toContractStatus(s domain.Status) (contract.Status, error) {
	switch s {
	case domain.StatusPending:
		return contract.StatusPending, nil
	case domain.StatusActive:
		return contract.StatusActive, nil
	case domain.StatusExpired:
		return contract.StatusExpired, nil
	case domain.StatusCancelled:
		return contract.StatusCancelled, nil
	}
	return "", fmt.Errorf("status %q has no contract value", s)
}

func toContractPaymentStatus(s domain.PaymentStatus) (contract.PaymentStatus, error) {
	switch s {
	case domain.PaymentNotRequired:
		return contract.PaymentNotRequired, nil
	case domain.PaymentPending:
		return contract.PaymentPending, nil
	case domain.PaymentPaid:
		return contract.PaymentPaid, nil
	case domain.PaymentRefunded:
		return contract.PaymentRefunded, nil
	}
	return "", fmt.Errorf("payment status %q has no contract value", s)
}

func toContractPackageKind(k domain.PackageKind) (contract.PackageKind, error) {
	switch k {
	case domain.PackageKindProjectBoost:
		return contract.KindProjectBoost, nil
	case domain.PackageKindPropertyObjectBoost:
		return contract.KindPropertyObjectBoost, nil
	case domain.PackageKindPostBoost:
		return contract.KindPostBoost, nil
	}
	return "", fmt.Errorf("package kind %q has no contract value", k)
}

func toContractTargetKind(k domain.TargetKind) (contract.TargetKind, error) {
	switch k {
	case domain.TargetKindProject:
		return contract.TargetProject, nil
	case domain.TargetKindPropertyObject:
		return contract.TargetPropertyObject, nil
	case domain.TargetKindPost:
		return contract.TargetPost, nil
	}
	return "", fmt.Errorf("target kind %q has no contract value", k)
}

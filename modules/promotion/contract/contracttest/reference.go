package contracttest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// The two reference consumers below are written from the contract document
// alone (docs/contracts/purchase-changed.md), as the billing and the
// notifications team will write theirs: no consumer kit, only the contract
// package to decode. They keep their state in memory, where a service keeps
// it in the database, in the transaction of the effect; what matters is the
// same: the dedupe entry, the version and the effect are stored together.

// Billing is a billing-style consumer: it deduplicates by messageId and
// keeps the version guard the contract's guarantees ask of every consumer
// (its consumers table names only messageId for billing: without the guard
// an Active first seen after its purchase's end would charge it), issues
// one invoice per Active purchase, and refunds it (a reversal) when the
// purchase is cancelled.
type Billing struct {
	// Logger receives the contract's warnings; slog.Default() when nil.
	Logger *slog.Logger

	mu       sync.Mutex
	seen     map[uuid.UUID]bool
	versions map[uuid.UUID]int64
	invoiced map[uuid.UUID]bool
	invoices []Effect // and refunds, in the order made
}

// Handle is the Handler of Billing.
func (b *Billing) Handle(_ context.Context, r contract.Record) error {
	e, err := contract.DecodeRecord(r, b.Logger)
	if err != nil {
		return fmt.Errorf("billing: dead-lettered: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[e.MessageID] {
		return nil // a redelivery: invoiced already, or not to be invoiced
	}
	if b.seen == nil {
		b.seen, b.versions, b.invoiced = map[uuid.UUID]bool{}, map[uuid.UUID]int64{}, map[uuid.UUID]bool{}
	}
	b.seen[e.MessageID] = true
	p := e.Payload
	if p.Version <= b.versions[p.PurchaseID] {
		return nil // stale: the purchase is at a later state already
	}
	b.versions[p.PurchaseID] = p.Version
	switch {
	case p.Status == contract.StatusActive:
		b.invoiced[p.PurchaseID] = true
		b.invoices = append(b.invoices, Effect{PurchaseID: p.PurchaseID, Status: p.Status, Version: p.Version})
	case p.Status == contract.StatusCancelled && b.invoiced[p.PurchaseID]:
		b.invoiced[p.PurchaseID] = false
		b.invoices = append(b.invoices, Effect{PurchaseID: p.PurchaseID, Status: p.Status, Version: p.Version, Kind: KindReversal})
	}
	return nil
}

// Consumer returns b as the kit drives it: an effect on Active; its
// reversal on Cancelled is never required (a purchase whose activation
// never came has nothing to refund), only held behind the invoice.
func (b *Billing) Consumer() Consumer {
	return Consumer{Handle: b.Handle, EffectOn: []contract.Status{contract.StatusActive},
		Observe: func(context.Context) (Observation, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			return Observation{Effects: append([]Effect(nil), b.invoices...)}, nil
		}}
}

// Notifier is a notifications-style consumer: it deduplicates by messageId
// and keeps a version guard per purchase, as the contract asks of
// notifications, and sends one notice per transition (запущено, отменено,
// срок истёк).
type Notifier struct {
	// Logger receives the contract's warnings; slog.Default() when nil.
	Logger *slog.Logger

	mu       sync.Mutex
	seen     map[uuid.UUID]bool
	versions map[uuid.UUID]int64
	notices  []Effect
}

// notified are the statuses a notice is sent for; another status (a later
// revision's) moves the guard on and sends nothing.
var notified = map[contract.Status]bool{contract.StatusActive: true, contract.StatusCancelled: true, contract.StatusExpired: true}

// Handle is the Handler of Notifier.
func (n *Notifier) Handle(_ context.Context, r contract.Record) error {
	e, err := contract.DecodeRecord(r, n.Logger)
	if err != nil {
		return fmt.Errorf("notifications: dead-lettered: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[e.MessageID] {
		return nil
	}
	if n.seen == nil {
		n.seen, n.versions = map[uuid.UUID]bool{}, map[uuid.UUID]int64{}
	}
	n.seen[e.MessageID] = true
	p := e.Payload
	if p.Version <= n.versions[p.PurchaseID] {
		return nil // stale: a later state was notified already
	}
	n.versions[p.PurchaseID] = p.Version
	if notified[p.Status] {
		n.notices = append(n.notices, Effect{PurchaseID: p.PurchaseID, Status: p.Status, Version: p.Version})
	}
	return nil
}

// Consumer returns n as the kit drives it: an effect on every transition.
func (n *Notifier) Consumer() Consumer {
	return Consumer{Handle: n.Handle,
		EffectOn: []contract.Status{contract.StatusActive, contract.StatusCancelled, contract.StatusExpired},
		Observe: func(context.Context) (Observation, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return Observation{Effects: append([]Effect(nil), n.notices...)}, nil
		}}
}

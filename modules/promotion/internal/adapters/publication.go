package adapters

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// Publication is a Kafka topic the purchase-changed event goes to, and the
// builder of its message. The module has one, contract version 1; while
// consumers move to a new contract version it has two, and each transition
// is written to both in its own transaction (docs/contracts/purchase-changed.md,
// "A breaking change: version 2").
type Publication struct {
	// Topic is the Kafka topic; the module declares it to the host
	// (OutboxTopics), and `pin migrate up` makes its outbox table.
	Topic string
	// Message builds the topic's message for p's current state. The
	// messages of one transition share messageID, so a consumer that
	// switches topics deduplicates across the switch. It returns an error,
	// never panics, when p cannot be expressed on the topic.
	Message func(ctx context.Context, p *domain.Purchase, occurredAt time.Time, messageID uuid.UUID) (*message.Message, error)
}

// PurchaseChangedV1 is the publication of contract version 1 on
// contract.Topic.
func PurchaseChangedV1() Publication {
	return Publication{Topic: contract.Topic, Message: purchaseChangedV1Message}
}

// Publications are every topic a transition is published to, in the order
// they are written.
type Publications []Publication

// Topics lists the publications' topics: the module's outbox declaration.
func (ps Publications) Topics() []string {
	topics := make([]string, len(ps))
	for i, p := range ps {
		topics[i] = p.Topic
	}
	return topics
}

// publicationsOrV1 checks the publications a repository is given:
// PurchaseChangedV1 when there are none, else each with a topic, once, and
// a message builder.
func publicationsOrV1(ps []Publication) (Publications, error) {
	if len(ps) == 0 {
		return Publications{PurchaseChangedV1()}, nil
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if p.Topic == "" || p.Message == nil || seen[p.Topic] {
			return nil, fmt.Errorf("adapters: publication %q: a topic, once, and a message builder are required", p.Topic)
		}
		seen[p.Topic] = true
	}
	return Publications(ps), nil
}

// lastEvent is what a purchase row keeps of the last event published for
// it (last_event_id, last_event_at): a snapshot redelivers that event.
type lastEvent struct {
	id uuid.UUID
	at time.Time
}

// legacyEventNamespace names the ids derived for purchases whose last event
// predates last_event_id and left the outbox (docs/adr/0012-purchase-snapshot.md).
var legacyEventNamespace = uuid.MustParse("6f1d2c58-3b7e-4c1a-9d0e-5a8b7c6d4e21")

// storedLastEvent is the event a snapshot redelivers for a purchase row and
// whether the row keeps its id; if not, the id is a UUIDv5 of (purchase id,
// version) at updatedAt, the same on every snapshot until the next
// transition, and no consumer has seen it.
func storedLastEvent(purchaseID uuid.UUID, version int64, updatedAt time.Time, id uuid.NullUUID, at sql.NullTime) (lastEvent, bool) {
	if id.Valid && at.Valid {
		return lastEvent{id: id.UUID, at: at.Time}, true
	}
	return lastEvent{id: uuid.NewSHA1(legacyEventNamespace, fmt.Appendf(nil, "%s/%d", purchaseID, version)), at: updatedAt}, false
}

// messages builds p's message for every publication, index-aligned with ps,
// under one fresh messageId (a UUIDv7), and returns what its row keeps of it.
func (ps Publications) messages(ctx context.Context, p *domain.Purchase, occurredAt time.Time) ([]*message.Message, lastEvent, error) {
	messageID, err := uuid.NewV7()
	if err != nil {
		return nil, lastEvent{}, fmt.Errorf("purchase-changed event of %s: message id: %w", p.ID(), err)
	}
	ev := lastEvent{id: messageID, at: occurredAt}
	msgs, err := ps.messagesOf(ctx, p, ev)
	return msgs, ev, err
}

// messagesOf builds p's message for every publication under ev's messageId
// and occurredAt: a new event's, or the one a snapshot redelivers.
func (ps Publications) messagesOf(ctx context.Context, p *domain.Purchase, ev lastEvent) ([]*message.Message, error) {
	msgs := make([]*message.Message, len(ps))
	for i, pub := range ps {
		var err error
		if msgs[i], err = pub.Message(ctx, p, ev.at, ev.id); err != nil {
			return nil, err
		}
		// The outbox keys an event by its purchase: the relay keeps each
		// key's order, and a change's statement stores it with that row.
		if key := msgs[i].Metadata.Get(kafka.MetaPartitionKey); key != p.ID().String() {
			return nil, fmt.Errorf("purchase-changed event of %s on %s: partition key %q is not the purchase id", p.ID(), pub.Topic, key)
		}
	}
	return msgs, nil
}

// outboxEvents are events, index-aligned message lists as messages returns
// them, as the outbox takes them: each publication's topic gets every
// event, in the same order.
func (ps Publications) outboxEvents(events ...[]*message.Message) []outbox.Event {
	out := make([]outbox.Event, 0, len(ps)*len(events))
	for i, pub := range ps {
		for _, e := range events {
			out = append(out, outbox.Event{Topic: pub.Topic, Message: e[i]})
		}
	}
	return out
}

// write stores events in the outbox of every publication within tx, for a
// change that is not one statement with them (a snapshot's redelivery):
// they commit with the caller's change or not at all.
func (ps Publications) write(ctx context.Context, tx postgres.Tx, out *outbox.Publisher, events ...[]*message.Message) error {
	return out.Write(ctx, tx, ps.outboxEvents(events...))
}

// writeWith runs query, one of the module's literal statements, which
// writes rows of the purchases keys names and calls
// outbox.publish(@events, <the ids it wrote>), with args and events (on
// every publication's topic) through outbox.Publisher.WriteWith. It
// returns the ids query returns, those of the rows it wrote.
func (ps Publications) writeWith(ctx context.Context, tx postgres.Tx, out *outbox.Publisher, query string, args pgx.NamedArgs,
	keys []string, events ...[]*message.Message) ([]string, error) {
	return out.WriteWith(ctx, tx, query, args, keys, ps.outboxEvents(events...))
}

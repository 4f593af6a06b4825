package adapters

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

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
	// Topic is the Kafka topic; the module's migrations create its outbox
	// table.
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

// storedLastEvent is the event a snapshot redelivers for a purchase row:
// the one it stores, else a UUIDv5 of (purchase id, version) at updatedAt,
// the same on every snapshot until the next transition.
func storedLastEvent(purchaseID uuid.UUID, version int64, updatedAt time.Time, id uuid.NullUUID, at sql.NullTime) lastEvent {
	if id.Valid && at.Valid {
		return lastEvent{id: id.UUID, at: at.Time}
	}
	return lastEvent{id: uuid.NewSHA1(legacyEventNamespace, fmt.Appendf(nil, "%s/%d", purchaseID, version)), at: updatedAt}
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
		// A statement's outbox CTE stores a message only with the row its
		// key names (outbox.Batch.CTE): any other key would drop the event.
		if key := msgs[i].Metadata.Get(kafka.MetaPartitionKey); key != p.ID().String() {
			return nil, fmt.Errorf("purchase-changed event of %s on %s: partition key %q is not the purchase id", p.ID(), pub.Topic, key)
		}
	}
	return msgs, nil
}

// publish writes each event's message for ps[i] to ps[i]'s topic within tx,
// events being index-aligned message lists as messages returns them: every
// topic gets the events in the same order, and all of them commit with the
// transitions or none does.
func (ps Publications) publish(ctx context.Context, tx postgres.Tx, out *outbox.Publisher, events ...[]*message.Message) error {
	for i, pub := range ps {
		if err := out.Publish(ctx, tx, pub.Topic, column(events, i)...); err != nil {
			return fmt.Errorf("publish to %s: %w", pub.Topic, err)
		}
	}
	return nil
}

// column is the message of publication i of every event.
func column(events [][]*message.Message, i int) []*message.Message {
	msgs := make([]*message.Message, len(events))
	for j, e := range events {
		msgs[j] = e[i]
	}
	return msgs
}

// readied are the outbox batches (outbox.Publisher.Ready) that one
// statement inserts, one per publication.
type readied []*outbox.Batch

// ready readies each event's message for ps[i] as ps[i]'s batch, for a
// statement that writes the change and its events at once (ctes).
func (ps Publications) ready(ctx context.Context, out *outbox.Publisher, events ...[]*message.Message) (readied, error) {
	bs := make(readied, 0, len(ps))
	for i, pub := range ps {
		b, err := out.Ready(ctx, pub.Topic, column(events, i)...)
		if err != nil {
			return nil, bs.done(fmt.Errorf("publish to %s: %w", pub.Topic, err))
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// ctes are the batches' inserts as CTEs ", event_0 AS (…)" of a statement
// whose CTE announced returns the ids of the rows written, with their
// parameters appended to args.
func (bs readied) ctes(announced string, args []any) (string, []any) {
	var out strings.Builder
	for i, b := range bs {
		out.WriteString(",\n" + b.CTE(fmt.Sprintf("event_%d", i), announced, len(args)+1))
		args = append(args, b.Args()...)
	}
	return out.String(), args
}

// done ends every publication with the statement's error and returns it.
func (bs readied) done(err error) error {
	for _, b := range bs {
		_ = b.Done(err) // err itself, wrapped with the topic
	}
	return err
}

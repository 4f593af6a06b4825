package adapters

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

//go:embed sql/snapshot_select_batch.sql
var snapshotSelectBatchQuery string

// SnapshotRepository is a snapshot's storage: it locks a batch of
// purchases and writes their events into the outbox, in one transaction
// per batch. It needs only the database, as `pin promotion snapshot` has.
type SnapshotRepository struct {
	db     *sql.DB
	outbox *outbox.Publisher
	events Publications
}

var _ app.SnapshotStore = (*SnapshotRepository)(nil)

// NewSnapshotRepository returns the repository. It writes each event to
// publications, PurchaseChangedV1 alone when none is given: the topics a
// transition is written to.
func NewSnapshotRepository(db *sql.DB, publisher *outbox.Publisher, publications ...Publication) (*SnapshotRepository, error) {
	if db == nil || publisher == nil {
		return nil, errors.New("adapters: snapshot repository needs a database and an outbox publisher")
	}
	events, err := publicationsOrV1(publications)
	if err != nil {
		return nil, err
	}
	return &SnapshotRepository{db: db, outbox: publisher, events: events}, nil
}

// SnapshotBatch implements app.SnapshotStore: four round trips and the
// commit (BEGIN, the plan settings, the locking selection, the outbox insert
// per publication).
func (r *SnapshotRepository) SnapshotBatch(ctx context.Context, b app.SnapshotBatch) (app.SnapshotBatchResult, error) {
	if b.Limit <= 0 || b.SnapshotID == uuid.Nil {
		return app.SnapshotBatchResult{}, errors.New("snapshot batch: a positive limit and a snapshot id are required")
	}
	var res app.SnapshotBatchResult
	err := postgres.InSQLTx(ctx, r.db, "snapshot batch", func(sqlTx *sql.Tx) error {
		tx := postgres.Tx{Exec: watermillsql.TxFromStdSQL(sqlTx)}
		rows, targets, err := selectSnapshotBatch(ctx, tx, b)
		if err != nil {
			return err
		}
		res = app.SnapshotBatchResult{Read: len(rows)}
		events := make([][]*message.Message, 0, len(rows))
		for _, m := range rows {
			res.Last = m.ID
			msgs, err := r.snapshotMessages(ctx, m, targets[m.ID], b.SnapshotID)
			if err != nil {
				res.Failed = append(res.Failed, app.FailedSnapshot{PurchaseID: m.ID, Err: err})
				continue
			}
			events = append(events, msgs)
		}
		if len(events) > 0 {
			if err := r.events.publish(ctx, tx, r.outbox, events...); err != nil {
				return fmt.Errorf("snapshot batch: %w", err)
			}
		}
		res.Events = len(events)
		return nil
	})
	if err != nil {
		return app.SnapshotBatchResult{}, err
	}
	return res, nil
}

// snapshotMessages builds a purchase's event for every publication as a
// transition builds it, at its stored version and with its last
// transition's moment (updated_at) as occurredAt, and marks them as the
// snapshot's: event_origin and the snapshot's id as correlation id.
func (r *SnapshotRepository) snapshotMessages(ctx context.Context, m purchaseModel, targets []targetModel, snapshotID uuid.UUID) ([]*message.Message, error) {
	p, err := toDomainPurchase(m, targets)
	if err != nil {
		return nil, err
	}
	msgs, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return nil, err
	}
	for _, msg := range msgs {
		msg.Metadata.Set(kafka.MetaEventOrigin, contract.EventOriginSnapshot)
		msg.Metadata.Set(kafka.MetaCorrelationID, snapshotID.String())
	}
	return msgs, nil
}

// snapshotPlanSettings make the transaction's selection walk the primary
// key in order, whatever the statistics (ADR 0013): on tables never
// analyzed the planner reads every matching purchase by a bitmap and sorts
// them, on every batch. A sort or a bitmap is never the right plan there.
const snapshotPlanSettings = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`

// selectSnapshotBatch runs snapshotSelectBatchQuery
// (sql/snapshot_select_batch.sql) under snapshotPlanSettings and returns the
// rows locked, in id order, with their targets.
func selectSnapshotBatch(ctx context.Context, tx postgres.Tx, b app.SnapshotBatch) ([]purchaseModel, map[uuid.UUID][]targetModel, error) {
	if _, err := tx.Exec.ExecContext(ctx, snapshotPlanSettings); err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: plan settings: %w", err)
	}
	var tenant uuid.NullUUID
	if b.Filter.TenantID != uuid.Nil {
		tenant = uuid.NullUUID{UUID: b.Filter.TenantID, Valid: true}
	}
	kind := sql.NullString{String: string(b.Filter.TargetKind), Valid: b.Filter.TargetKind != ""}
	rows, err := tx.Exec.QueryContext(ctx, snapshotSelectBatchQuery, b.After, b.Limit, b.Filter.IncludeEnded,
		tenant, uuidStrings(b.Filter.PurchaseIDs), kind)
	if err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := make([]purchaseModel, 0, b.Limit)
	targets := make(map[uuid.UUID][]targetModel, b.Limit)
	for rows.Next() {
		var m purchaseModel
		var ts sql.NullString
		if err := rows.Scan(append(purchaseFields(&m), &ts)...); err != nil {
			return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
		}
		out = append(out, m)
		if parsed := parseTargets(m.ID, ts.String); parsed != nil {
			targets[m.ID] = parsed
		}
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
	}
	return out, targets, nil
}

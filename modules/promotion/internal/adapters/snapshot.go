package adapters

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

//go:embed sql/snapshot_select_batch.sql
var snapshotSelectBatchQuery string

// SnapshotRepository is a snapshot's storage: it keeps each snapshot's
// filter and position, locks a batch of purchases and redelivers their last
// events into the outbox, in one transaction per batch that also moves the
// snapshot's position. It needs only the database, as `pin promotion
// snapshot` has.
type SnapshotRepository struct {
	db     *gorm.DB
	sql    *sql.DB // db's pool, for the snapshot's own row
	outbox *outbox.Publisher
	events Publications
}

var _ app.SnapshotStore = (*SnapshotRepository)(nil)

// NewSnapshotRepository returns the repository. It writes each event to
// publications, PurchaseChangedV1 alone when none is given: the topics a
// transition is written to.
func NewSnapshotRepository(db *gorm.DB, publisher *outbox.Publisher, publications ...Publication) (*SnapshotRepository, error) {
	if db == nil || publisher == nil {
		return nil, errors.New("adapters: snapshot repository needs a database and an outbox publisher")
	}
	pool, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("adapters: snapshot repository: %w", err)
	}
	events, err := publicationsOrV1(publications)
	if err != nil {
		return nil, err
	}
	return &SnapshotRepository{db: db, sql: pool, outbox: publisher, events: events}, nil
}

// StartSnapshot implements app.SnapshotStore. promotion.snapshot_runs keeps
// each snapshot's filter and position (migrations/00008_snapshot_redelivery.sql).
func (r *SnapshotRepository) StartSnapshot(ctx context.Context, run app.SnapshotRun) error {
	tenant, kind := snapshotFilterArgs(run.Filter)
	_, err := r.sql.ExecContext(ctx, `INSERT INTO promotion.snapshot_runs
		(id, tenant_id, purchase_ids, target_kind, include_ended, started_at, updated_at)
		VALUES (@id, @tenant_id, @purchase_ids::uuid[], @target_kind, @include_ended, now(), now())`,
		pgx.NamedArgs{"id": run.ID, "tenant_id": tenant, "purchase_ids": uuidStrings(run.Filter.PurchaseIDs),
			"target_kind": kind, "include_ended": run.Filter.IncludeEnded})
	if err != nil {
		return fmt.Errorf("store snapshot %s: %w", run.ID, err)
	}
	return nil
}

// Snapshot implements app.SnapshotStore.
func (r *SnapshotRepository) Snapshot(ctx context.Context, id uuid.UUID) (app.SnapshotRun, error) {
	run := app.SnapshotRun{ID: id}
	var tenant uuid.NullUUID
	var purchases string
	var kind sql.NullString
	err := r.sql.QueryRowContext(ctx, `SELECT tenant_id, array_to_string(purchase_ids, ','), target_kind, include_ended,
		after_purchase_id, events, failed, completed_at IS NOT NULL FROM promotion.snapshot_runs WHERE id = @id`,
		pgx.NamedArgs{"id": id}).
		Scan(&tenant, &purchases, &kind, &run.Filter.IncludeEnded, &run.After, &run.Events, &run.Failed, &run.Complete)
	if errors.Is(err, sql.ErrNoRows) {
		return app.SnapshotRun{}, fmt.Errorf("%w: no snapshot has the id %s", app.ErrSnapshotNotFound, id)
	}
	if err != nil {
		return app.SnapshotRun{}, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	run.Filter.TenantID, run.Filter.TargetKind = tenant.UUID, domain.TargetKind(kind.String)
	for _, s := range strings.FieldsFunc(purchases, func(r rune) bool { return r == ',' }) {
		id, err := uuid.Parse(s)
		if err != nil {
			return app.SnapshotRun{}, fmt.Errorf("read snapshot %s: purchase %q: %w", run.ID, s, err)
		}
		run.Filter.PurchaseIDs = append(run.Filter.PurchaseIDs, id)
	}
	return run, nil
}

// SnapshotBatch implements app.SnapshotStore: seven round trips and the
// commit (BEGIN, the frozen-client bounds, the snapshot's row locked, the
// plan settings, the locking selection, the outbox insert per publication,
// the snapshot's row moved on).
func (r *SnapshotRepository) SnapshotBatch(ctx context.Context, b app.SnapshotBatch) (app.SnapshotBatchResult, error) {
	if b.Limit <= 0 || b.SnapshotID == uuid.Nil {
		return app.SnapshotBatchResult{}, errors.New("snapshot batch: a positive limit and a snapshot id are required")
	}
	var res app.SnapshotBatchResult
	err := postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		if _, err := tx.ExecContext(ctx, snapshotSession, snapshotSessionArgs); err != nil {
			return fmt.Errorf("snapshot batch: set its bounds: %w", err)
		}
		if err := lockSnapshotAt(ctx, tx, b); err != nil {
			return err
		}
		rows, targets, err := selectSnapshotBatch(ctx, tx, b)
		if err != nil {
			return err
		}
		res = app.SnapshotBatchResult{Read: len(rows), Last: b.After}
		events := make([][]*message.Message, 0, len(rows))
		for _, row := range rows {
			res.Last = row.ID
			ev, known := storedLastEvent(row.ID, row.Version, row.UpdatedAt, row.lastEventID, row.lastEventAt)
			unknown := app.UnknownIDSnapshot{Action: app.UnknownIDSkipped, PurchaseID: row.ID, TenantID: row.TenantID,
				Status: row.Status, Version: row.Version}
			if !known && !b.SendDerivedIDs {
				res.Unknown = append(res.Unknown, unknown)
				continue
			}
			msgs, err := r.snapshotMessages(ctx, row, targets[row.ID], ev, b.SnapshotID)
			if err != nil {
				res.Failed = append(res.Failed, app.FailedSnapshot{PurchaseID: row.ID, Err: err})
				continue
			}
			if !known {
				unknown.Action, unknown.DerivedID = app.UnknownIDSent, ev.id
				res.Unknown = append(res.Unknown, unknown)
			}
			events = append(events, msgs)
		}
		if len(events) > 0 {
			if err := r.events.write(ctx, tx, r.outbox, events...); err != nil {
				return fmt.Errorf("snapshot batch: %w", err)
			}
		}
		res.Events = len(events)
		_, err = tx.ExecContext(ctx, `UPDATE promotion.snapshot_runs
			SET after_purchase_id = @after, events = events + @events, failed = failed + @failed, updated_at = now(),
				completed_at = CASE WHEN @complete THEN now() END
			WHERE id = @id`, pgx.NamedArgs{"id": b.SnapshotID, "after": res.Last, "events": res.Events,
			"failed": len(res.Failed), "complete": res.Read < b.Limit})
		if err != nil {
			return fmt.Errorf("snapshot batch: move snapshot %s on: %w", b.SnapshotID, err)
		}
		return nil
	})
	if err != nil {
		return app.SnapshotBatchResult{}, err
	}
	return res, nil
}

// snapshotSession is a snapshot batch's first statement (SET LOCAL): the
// expiry batch's bounds on a frozen client (ADR 0014, decisions 7 and 9),
// since the batch holds up to 1000 purchases FOR SHARE and an operator's pool
// has no bounds of its own. The server ends the session of a client silent
// inside the batch, or one not reading the rows it is sent.
const snapshotSession = `SELECT set_config('idle_in_transaction_session_timeout', @idle_in_transaction_session_timeout, true),
	set_config('tcp_user_timeout', @tcp_user_timeout, true)`

// snapshotSessionArgs are snapshotSession's parameters: DefaultExpireTimeouts'.
var snapshotSessionArgs = DefaultExpireTimeouts.frozenClientArgs()

// lockSnapshotAt locks the snapshot's row until the batch commits, so two
// processes resuming one snapshot take turns, and checks that it stands at
// b.After: a turn taken by the other process is refused, not repeated.
func lockSnapshotAt(ctx context.Context, tx postgres.Tx, b app.SnapshotBatch) error {
	var after uuid.UUID
	var complete bool
	err := tx.GORM().Raw(`SELECT after_purchase_id, completed_at IS NOT NULL FROM promotion.snapshot_runs
		WHERE id = @id FOR UPDATE`, sql.Named("id", b.SnapshotID)).Row().Scan(&after, &complete)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: no snapshot has the id %s", app.ErrSnapshotNotFound, b.SnapshotID)
	case err != nil:
		return fmt.Errorf("lock snapshot %s: %w", b.SnapshotID, err)
	case after != b.After || complete:
		return fmt.Errorf("%w: it stands after %s (complete: %t), this run left it after %s",
			app.ErrSnapshotMovedOn, after, complete, b.After)
	}
	return nil
}

// snapshotMessages rebuilds, for every publication, a purchase's last
// published event: from its row (the state after its last transition) under
// ev, the messageId and occurredAt the row keeps (storedLastEvent), and marks
// them as the snapshot's: event_origin and the snapshot's id as correlation id.
func (r *SnapshotRepository) snapshotMessages(ctx context.Context, row snapshotRow, targets []targetModel, ev lastEvent, snapshotID uuid.UUID) ([]*message.Message, error) {
	p, err := toDomainPurchase(row.purchaseModel, targets)
	if err != nil {
		return nil, err
	}
	msgs, err := r.events.messagesOf(ctx, p, ev)
	if err != nil {
		return nil, err
	}
	for _, msg := range msgs {
		msg.Metadata.Set(kafka.MetaEventOrigin, contract.EventOriginSnapshot)
		msg.Metadata.Set(kafka.MetaCorrelationID, snapshotID.String())
	}
	return msgs, nil
}

// snapshotRow is a purchase row as a snapshot reads it: with what it keeps
// of its last event.
type snapshotRow struct {
	purchaseModel
	lastEventID uuid.NullUUID
	lastEventAt sql.NullTime
}

// snapshotFilterArgs are a filter's nullable parameters: tenant and target kind.
func snapshotFilterArgs(f app.SnapshotFilter) (uuid.NullUUID, sql.NullString) {
	return uuid.NullUUID{UUID: f.TenantID, Valid: f.TenantID != uuid.Nil},
		sql.NullString{String: string(f.TargetKind), Valid: f.TargetKind != ""}
}

// snapshotPlanSettings make the transaction's selection walk the primary
// key in order, whatever the statistics (ADR 0013): on tables never
// analyzed the planner reads every matching purchase by a bitmap and sorts
// them, on every batch. A sort or a bitmap is never the right plan there.
const snapshotPlanSettings = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`

// selectSnapshotBatch runs snapshotSelectBatchQuery
// (sql/snapshot_select_batch.sql) under snapshotPlanSettings and returns the
// rows locked, in id order, with their targets.
func selectSnapshotBatch(ctx context.Context, tx postgres.Tx, b app.SnapshotBatch) ([]snapshotRow, map[uuid.UUID][]targetModel, error) {
	if _, err := tx.ExecContext(ctx, snapshotPlanSettings); err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: plan settings: %w", err)
	}
	tenant, kind := snapshotFilterArgs(b.Filter)
	rows, err := tx.QueryContext(ctx, snapshotSelectBatchQuery, pgx.NamedArgs{
		"after": b.After, "batch_limit": b.Limit, "include_ended": b.Filter.IncludeEnded,
		"tenant_id": tenant, "purchase_ids": uuidStrings(b.Filter.PurchaseIDs), "target_kind": kind})
	if err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := make([]snapshotRow, 0, b.Limit)
	targets := make(map[uuid.UUID][]targetModel, b.Limit)
	for rows.Next() {
		var row snapshotRow
		var ts sql.NullString
		if err := rows.Scan(append(purchaseFields(&row.purchaseModel), &ts, &row.lastEventID, &row.lastEventAt)...); err != nil {
			return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
		}
		out = append(out, row)
		if parsed := parseTargets(row.ID, ts.String); parsed != nil {
			targets[row.ID] = parsed
		}
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("select snapshot batch: %w", err)
	}
	return out, targets, nil
}

package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// ExpireRepository is the expiry job's storage: it selects due purchases
// with their rows locked, writes a batch of transitions as one set-based
// UPDATE and puts the batch's events into the outbox in one insert, all in
// one transaction.
type ExpireRepository struct {
	db     *gorm.DB
	outbox *outbox.Publisher
	events Publications
}

var _ app.ExpireStore = (*ExpireRepository)(nil)

// NewExpireRepository returns the repository. It publishes each event to
// publications, PurchaseChangedV1 alone when none is given.
func NewExpireRepository(db *gorm.DB, publisher *outbox.Publisher, publications ...Publication) (*ExpireRepository, error) {
	if db == nil || publisher == nil {
		return nil, errors.New("adapters: expire repository needs a database and an outbox publisher")
	}
	events, err := publicationsOrV1(publications)
	if err != nil {
		return nil, err
	}
	return &ExpireRepository{db: db, outbox: publisher, events: events}, nil
}

// expiryCandidate is a locked purchase after its transition, before it is
// written.
type expiryCandidate struct {
	transition
	events []*message.Message // one per publication
}

// ExpireBatch implements app.ExpireStore; b.Expire may run on several
// goroutines. Every poison check (transition, event) runs before the first
// write, and the rows stay locked until the commit, so no cancellation can
// slip between a transition and its event. A batch is five round trips:
// BEGIN, SET LOCAL, one selection, one write (transitions, events, poison
// forgotten), COMMIT. When the set-based write fails for a row's data
// (faultOf), the batch is rolled back and done again with a savepoint per
// row, so only that row is set aside; any other error rolls it back whole.
func (r *ExpireRepository) ExpireBatch(ctx context.Context, b app.ExpireBatch) (app.ExpireBatchResult, error) {
	if b.Limit <= 0 || b.Expire == nil {
		return app.ExpireBatchResult{}, errors.New("expire batch: a positive limit and an Expire func are required")
	}
	res, err := r.expireBatch(ctx, b, false)
	if errors.Is(err, errSetRefused) {
		res, err = r.expireBatch(ctx, b, true)
	}
	if err != nil {
		return app.ExpireBatchResult{}, err
	}
	return res, nil
}

// errSetRefused marks a row error of the set-based write: the batch is
// redone row by row.
var errSetRefused = errors.New("a row refused the set-based write")

func (r *ExpireRepository) expireBatch(ctx context.Context, b app.ExpireBatch, rowByRow bool) (app.ExpireBatchResult, error) {
	var res app.ExpireBatchResult
	err := postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		res = app.ExpireBatchResult{}
		// The batch's statements plan the same for any parameters: a custom
		// plan per batch cost more than running the selection (performance.md).
		if _, err := tx.Exec.ExecContext(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return fmt.Errorf("set plan cache mode: %w", err)
		}
		sel, err := selectBatch(ctx, tx, b)
		if err != nil {
			return err
		}
		res.SkippedLocked, res.Retried, res.Selected = sel.skipped, sel.retried, len(sel.rows)
		if b.Selected != nil {
			b.Selected(len(sel.rows))
		}
		if len(sel.rows) == 0 {
			return nil
		}
		candidates, unprepared := prepareExpiries(ctx, r.events, sel.rows, sel.targets, b)
		res.Failed = append(res.Failed, unprepared...)

		var written []expiryCandidate
		var unwritten []transition
		var failed []app.FailedExpiry
		if rowByRow {
			written, unwritten, failed, err = r.writeRowByRow(ctx, tx, candidates)
		} else {
			written, unwritten, err = r.writeSet(ctx, tx, candidates, sel.retried > 0)
			if err != nil && faultOf(err) == rowFault {
				return fmt.Errorf("%w: %w", errSetRefused, err)
			}
		}
		if err != nil {
			return err
		}
		res.Failed = append(res.Failed, failed...)
		superseded, refused, err := rereadUnwritten(ctx, tx, unwritten)
		if err != nil {
			return err
		}
		res.Superseded = superseded
		res.Failed = append(res.Failed, refused...)
		if err := rememberPoison(ctx, tx, b.AsOf, res.Failed); err != nil {
			return err
		}
		for _, c := range written {
			res.Expired = append(res.Expired, c.purchase)
		}
		return nil
	})
	if err != nil {
		return app.ExpireBatchResult{}, err
	}
	return res, nil
}

// knownPoison is true of a purchase the job has failed to expire before
// (promotion.expire_poison); such a purchase is retried only in the room
// a batch's due purchases leave.
const knownPoison = `EXISTS (SELECT 1 FROM ` + expirePoisonTable + ` AS x WHERE x.purchase_id = ` + purchasesTable + `.id)`

// PoisonRetrySlots is how many known poison purchases a batch retries at
// most (a tenth, at least one), and only in the room its due purchases
// leave: the limit bounds the batch, and poison never takes a healthy
// purchase's slot.
func PoisonRetrySlots(limit int) int { return max(limit/10, 1) }

// purchaseColumns are the columns of purchaseModel in the order
// purchaseFields scans them; a test compares them with the model.
var purchaseColumns = []string{
	"id", "tenant_id", "package_id", "package_code", "package_kind", "boost_weight",
	"price_amount", "currency_id", "currency_iso_code", "currency_name", "currency_sign",
	"status", "payment_status", "starts_at", "ends_at", "cancel_reason",
	"created_by_user_id", "updated_by_user_id", "created_at", "updated_at", "version",
}

// purchaseFields are the scan destinations of purchaseColumns in m.
func purchaseFields(m *purchaseModel) []any {
	return []any{&m.ID, &m.TenantID, &m.PackageID, &m.PackageCode, &m.PackageKind, &m.BoostWeight,
		&m.PriceAmount, &m.CurrencyID, &m.CurrencyIsoCode, &m.CurrencyName, &m.CurrencySign,
		&m.Status, &m.PaymentStatus, &m.StartsAt, &m.EndsAt, &m.CancelReason,
		&m.CreatedByUserID, &m.UpdatedByUserID, &m.CreatedAt, &m.UpdatedAt, &m.Version}
}

// columnList is cols joined for a SELECT, each with prefix.
func columnList(prefix string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + c
	}
	return strings.Join(out, ", ")
}

// selectBatchQuery selects a batch in one round trip ($1 AsOf, $2 Exclude,
// $3 Limit, $4 the most poison retries, PoisonRetrySlots):
//   - due: Active, due, not known poison, oldest first, FOR UPDATE SKIP
//     LOCKED; WHERE and ORDER BY match the partial index
//     promotion_purchases_expiry_idx, so terminal rows cost nothing;
//   - retry: known poison, least recently tried first, at most $4 and only
//     in the room the due rows leave under the limit;
//   - each row's targets as "kind id,kind id" in position order;
//   - skipped: due rows another transaction holds. SKIP LOCKED does not say,
//     so a plain read (it does not wait for locks) counts the window the
//     selection scanned, capped, minus the rows taken. The window ends at
//     the batch's last row when the batch is full, else at the last due
//     row: one row bound, AND-ed, so it is the count's index condition and
//     the count reads the window, not the backlog (an OR made it a filter;
//     TestExpireSkippedCountScansOnlyTheBatchWindow).
var selectBatchQuery = `WITH due AS (
	SELECT ` + columnList("", purchaseColumns) + ` FROM ` + purchasesTable + `
	WHERE status = 'Active' AND ends_at <= $1 AND id <> ALL($2::uuid[]) AND NOT ` + knownPoison + `
	ORDER BY ends_at, id LIMIT $3
	FOR UPDATE SKIP LOCKED
), retry AS (
	SELECT ` + columnList("p.", purchaseColumns) + `, x.last_attempt_at AS sort_at
	FROM ` + purchasesTable + ` AS p JOIN ` + expirePoisonTable + ` AS x ON x.purchase_id = p.id
	WHERE p.status = 'Active' AND p.ends_at <= $1 AND p.id <> ALL($2::uuid[])
	ORDER BY x.last_attempt_at, x.purchase_id LIMIT least($4, $3 - (SELECT count(*) FROM due))
	FOR UPDATE OF p SKIP LOCKED
), picked AS (
	SELECT 0 AS slot, ends_at AS sort_at, ` + columnList("", purchaseColumns) + ` FROM due
	UNION ALL
	SELECT 1, sort_at, ` + columnList("", purchaseColumns) + ` FROM retry
)
SELECT ` + columnList("k.", purchaseColumns) + `, k.slot,
	(SELECT string_agg(t.target_kind || ' ' || t.target_id::text, ',' ORDER BY t.position)
		FROM ` + purchaseTargetsTable + ` AS t WHERE t.purchase_id = k.id),
	(SELECT count(*) FROM (
		SELECT 1 FROM ` + purchasesTable + ` AS q
		WHERE q.status = 'Active' AND q.ends_at <= $1 AND q.id <> ALL($2::uuid[])
			AND NOT EXISTS (SELECT 1 FROM ` + expirePoisonTable + ` AS x WHERE x.purchase_id = q.id)
			AND (q.ends_at, q.id) <= (SELECT ends_at, id FROM (
				(SELECT ends_at, id FROM due ORDER BY ends_at, id OFFSET $3 - 1 LIMIT 1)
				UNION ALL SELECT $1, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS bound
				ORDER BY ends_at, id LIMIT 1)
		ORDER BY q.ends_at, q.id LIMIT $3 + (SELECT count(*) FROM due)
	) AS w) - (SELECT count(*) FROM due)
FROM picked AS k
ORDER BY k.slot, k.sort_at, k.id`

// batchSelection is what selectBatch locked.
type batchSelection struct {
	rows    []purchaseModel
	targets map[uuid.UUID][]targetModel
	retried int
	skipped int
}

// selectBatch runs selectBatchQuery. Without a row it cannot carry the
// skipped count, which is then asked for alone.
func selectBatch(ctx context.Context, tx postgres.Tx, b app.ExpireBatch) (batchSelection, error) {
	exclude := uuidStrings(b.Exclude)
	rows, err := tx.Exec.QueryContext(ctx, selectBatchQuery, b.AsOf, exclude, b.Limit, PoisonRetrySlots(b.Limit))
	if err != nil {
		return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
	}
	defer rows.Close()
	sel := batchSelection{rows: make([]purchaseModel, 0, b.Limit), targets: make(map[uuid.UUID][]targetModel, b.Limit)}
	for rows.Next() {
		var m purchaseModel
		var slot int
		var targets sql.NullString
		if err := rows.Scan(append(purchaseFields(&m), &slot, &targets, &sel.skipped)...); err != nil {
			return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
		}
		sel.rows = append(sel.rows, m)
		sel.retried += slot
		if ts := parseTargets(m.ID, targets.String); ts != nil {
			sel.targets[m.ID] = ts
		}
	}
	if err := rows.Close(); err != nil {
		return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
	}
	sel.skipped = max(sel.skipped, 0)
	if len(sel.rows) == 0 {
		rows, err := tx.Exec.QueryContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+purchasesTable+`
	WHERE status = 'Active' AND ends_at <= $1 AND id <> ALL($2::uuid[]) AND NOT `+knownPoison+`
	ORDER BY ends_at, id LIMIT $3) AS w`, b.AsOf, exclude, b.Limit)
		if err != nil {
			return batchSelection{}, fmt.Errorf("count skipped-locked purchases: %w", err)
		}
		defer rows.Close()
		if rows.Next() {
			err = rows.Scan(&sel.skipped)
		}
		if err := errors.Join(err, rows.Close()); err != nil {
			return batchSelection{}, fmt.Errorf("count skipped-locked purchases: %w", err)
		}
	}
	return sel, nil
}

// parseTargets reads selectBatchQuery's "kind id,kind id". A target that
// does not parse keeps the whole text as its kind, so the purchase fails as
// a poison item (unknown kind), not the batch.
func parseTargets(purchaseID uuid.UUID, s string) []targetModel {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]targetModel, len(parts))
	for i, part := range parts {
		kind, id, _ := strings.Cut(part, " ")
		tid, err := uuid.Parse(id)
		if err != nil {
			kind = part
		}
		out[i] = targetModel{PurchaseID: purchaseID, TargetKind: kind, TargetID: tid, Position: int16(i)}
	}
	return out
}

// rememberPoison records the batch's failures in promotion.expire_poison
// (one more failure, the last error and attempt), in its transaction.
func rememberPoison(ctx context.Context, tx postgres.Tx, asOf time.Time, failed []app.FailedExpiry) error {
	if len(failed) == 0 {
		return nil
	}
	ids, msgs := make([]uuid.UUID, len(failed)), make([]string, len(failed))
	for i, f := range failed {
		// A text column holds no NUL and no invalid UTF-8: an error echoing
		// such bytes must not turn into a fault of the whole batch.
		ids[i], msgs[i] = f.PurchaseID, strings.ToValidUTF8(strings.ReplaceAll(f.Err.Error(), "\x00", ""), "\uFFFD")
	}
	_, err := tx.Exec.ExecContext(ctx, `INSERT INTO `+expirePoisonTable+` AS x
	(purchase_id, failures, last_error, first_failed_at, last_attempt_at)
SELECT v.id, 1, v.err, $3, $3 FROM unnest($1::uuid[], $2::text[]) AS v(id, err)
ON CONFLICT (purchase_id) DO UPDATE
SET failures = x.failures + 1, last_error = EXCLUDED.last_error, last_attempt_at = EXCLUDED.last_attempt_at`,
		uuidStrings(ids), msgs, asOf)
	if err != nil {
		return fmt.Errorf("remember poison purchases: %w", err)
	}
	return nil
}

// parallelPrepareMin is the batch size from which events are built on
// several goroutines.
const parallelPrepareMin = 32

// prepareExpiries runs prepareExpiry for every row, in selection order, on
// GOMAXPROCS goroutines for a large batch: building the events is most of a
// batch's CPU time.
func prepareExpiries(ctx context.Context, events Publications, rows []purchaseModel, targets map[uuid.UUID][]targetModel, b app.ExpireBatch) ([]expiryCandidate, []app.FailedExpiry) {
	prepared := make([]expiryCandidate, len(rows))
	errs := make([]error, len(rows))
	workers := min(runtime.GOMAXPROCS(0), len(rows)/(parallelPrepareMin/2))
	if len(rows) < parallelPrepareMin || workers < 2 {
		for i, m := range rows {
			prepared[i], errs[i] = prepareExpiry(ctx, events, m, targets[m.ID], b)
		}
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(rows); i += workers {
					prepared[i], errs[i] = prepareExpiry(ctx, events, rows[i], targets[rows[i].ID], b)
				}
			}()
		}
		wg.Wait()
	}
	candidates := make([]expiryCandidate, 0, len(rows))
	var failed []app.FailedExpiry
	for i, m := range rows {
		if errs[i] != nil {
			failed = append(failed, app.FailedExpiry{PurchaseID: m.ID, Err: errs[i]})
			continue
		}
		candidates = append(candidates, prepared[i])
	}
	return candidates, failed
}

// prepareExpiry rebuilds a locked purchase, makes its transition and builds
// its events. A panic becomes the item's error: on a worker goroutine it
// would end the process, and it concerns this purchase only.
func prepareExpiry(ctx context.Context, events Publications, m purchaseModel, targets []targetModel, b app.ExpireBatch) (c expiryCandidate, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = expiryCandidate{}, fmt.Errorf("purchase %s: panic while preparing its expiry: %v", m.ID, r)
		}
	}()
	p, err := toDomainPurchase(m, targets)
	if err != nil {
		return expiryCandidate{}, err
	}
	previous := p.Version()
	if err := b.Expire(p); err != nil {
		return expiryCandidate{}, fmt.Errorf("expire: %w", err)
	}
	if p.Version() == previous || p.Status() != domain.StatusExpired {
		return expiryCandidate{}, fmt.Errorf("expire: purchase %s made no transition to Expired", p.ID())
	}
	// occurredAt is the transition's moment: UpdatedAt, which Expire set to
	// the cycle's AsOf.
	msgs, err := events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return expiryCandidate{}, err
	}
	return expiryCandidate{transition: transition{purchase: p, previousVersion: previous, loaded: &m}, events: msgs}, nil
}

// writeSet writes the candidates' transitions, their events and forgets the
// expired ones' poison records (when forgetPoison) in one statement: the
// transition write (transitionWrite) with the outbox inserts and the
// poison DELETE as CTEs over the rows it updated. A row its version guard
// filters out gets no event and is returned unwritten. The events are
// inserted in no particular order: they are of distinct purchases, and the
// relay keeps order only per key (sorting them cost 0.5 ms a batch).
func (r *ExpireRepository) writeSet(ctx context.Context, tx postgres.Tx, cs []expiryCandidate, forgetPoison bool) ([]expiryCandidate, []transition, error) {
	if len(cs) == 0 {
		return nil, nil, nil
	}
	ts := make([]transition, len(cs))
	for i, c := range cs {
		ts[i] = c.transition
	}
	update, args := transitionWrite(ts)
	events := make([][]*message.Message, len(cs))
	for i, c := range cs {
		events[i] = c.events
	}
	bs, err := r.events.ready(ctx, r.outbox, events...)
	if err != nil {
		return nil, nil, err
	}
	ctes, args := bs.ctes("updated", args)
	query := "WITH updated AS (" + update + ")" + ctes
	if forgetPoison {
		query += `,
forgotten AS (DELETE FROM ` + expirePoisonTable + ` WHERE purchase_id IN (SELECT id FROM updated))`
	}
	updated, err := queryIDs(ctx, tx, query+"\nSELECT id FROM updated", args)
	if err := bs.done(err); err != nil {
		return nil, nil, fmt.Errorf("write expired purchases: %w", err)
	}
	idx, unwritten := splitWritten(ts, updated)
	written := make([]expiryCandidate, len(idx))
	for i, j := range idx {
		written[i] = cs[j]
	}
	return written, unwritten, nil
}

// writeRowByRow writes each candidate's transition and events under its own
// savepoint, so a row whose own statements fail for its data (faultOf) is
// set aside and the others are kept, then forgets the poison records of
// those written. Any other error aborts the batch.
func (r *ExpireRepository) writeRowByRow(ctx context.Context, tx postgres.Tx, cs []expiryCandidate) (written []expiryCandidate, unwritten []transition, failed []app.FailedExpiry, err error) {
	for _, c := range cs {
		var stale []transition
		rowErr := inSavepoint(ctx, tx, "expire_item", func() error {
			var err error
			if _, stale, err = writeTransitionSet(ctx, tx, []transition{c.transition}); err != nil || len(stale) > 0 {
				return err
			}
			return r.events.publish(ctx, tx, r.outbox, c.events)
		})
		switch {
		case rowErr == nil && len(stale) > 0:
			unwritten = append(unwritten, stale...)
		case rowErr == nil:
			written = append(written, c)
		case faultOf(rowErr) == rowFault:
			failed = append(failed, app.FailedExpiry{PurchaseID: c.purchase.ID(), Err: rowErr})
		default:
			return nil, nil, nil, rowErr
		}
	}
	if len(written) == 0 {
		return nil, unwritten, failed, nil
	}
	ids := make([]uuid.UUID, len(written))
	for i, c := range written {
		ids[i] = c.purchase.ID()
	}
	if _, err := tx.Exec.ExecContext(ctx, `DELETE FROM `+expirePoisonTable+` WHERE purchase_id = ANY($1::uuid[])`,
		uuidStrings(ids)); err != nil {
		return nil, nil, nil, fmt.Errorf("forget expired poison purchases: %w", err)
	}
	return written, unwritten, failed, nil
}

// rereadUnwritten re-reads the rows the version guard filtered out. A row
// whose version moved on (or that is gone) lost a race to another writer:
// it is superseded, not poison, and the next selection sees its new state.
// A row still at the version it was loaded at was not written for a reason
// of its own (a trigger or rule skipped it) and is poison.
func rereadUnwritten(ctx context.Context, tx postgres.Tx, ts []transition) ([]app.SupersededExpiry, []app.FailedExpiry, error) {
	if len(ts) == 0 {
		return nil, nil, nil
	}
	ids := make([]uuid.UUID, len(ts))
	for i, t := range ts {
		ids[i] = t.purchase.ID()
	}
	rows, err := tx.Exec.QueryContext(ctx, `SELECT id, status, version FROM `+purchasesTable+` WHERE id = ANY($1::uuid[])`, uuidStrings(ids))
	if err != nil {
		return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	defer rows.Close()
	current := make(map[uuid.UUID]app.SupersededExpiry, len(ts))
	for rows.Next() {
		var s app.SupersededExpiry
		if err := rows.Scan(&s.PurchaseID, &s.Status, &s.Version); err != nil {
			return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
		}
		current[s.PurchaseID] = s
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	var superseded []app.SupersededExpiry
	var refused []app.FailedExpiry
	for _, t := range ts {
		now, found := current[t.purchase.ID()]
		if found && now.Version == t.previousVersion {
			refused = append(refused, app.FailedExpiry{PurchaseID: t.purchase.ID(),
				Err: fmt.Errorf("purchase %s at version %d was not updated: a trigger or rule skipped its row", t.purchase.ID(), t.previousVersion)})
			continue
		}
		now.PurchaseID = t.purchase.ID()
		superseded = append(superseded, now)
	}
	return superseded, refused, nil
}

// inSavepoint runs fn after SAVEPOINT name; on fn's error it rolls back to
// the savepoint (the transaction stays usable) and returns fn's error, or
// the rollback's error when even that fails.
func inSavepoint(ctx context.Context, tx postgres.Tx, name string, fn func() error) error {
	if _, err := tx.Exec.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("savepoint %s: %w", name, err)
	}
	if err := fn(); err != nil {
		if _, rbErr := tx.Exec.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); rbErr != nil {
			// Only rbErr is wrapped: the transaction is broken, whatever
			// fn's error was, so this must not pass for a row error.
			return fmt.Errorf("rollback to savepoint %s: %w (after: %v)", name, rbErr, err)
		}
		return err
	}
	if _, err := tx.Exec.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint %s: %w", name, err)
	}
	return nil
}

// fault is whose fault an error of the expiry's write is: a row's (the
// row is set aside as poison, the rest commits) or the batch's (the whole
// batch rolls back, nothing is remembered, the cycle fails).
type fault int

const (
	batchFault fault = iota
	rowFault
)

// faultBySQLStateClass is the one table that says whose fault a PostgreSQL
// error is, by SQLSTATE class (its first two characters), when that row's
// own statement raised it. Only the row's data can be its fault; a class
// not listed is the batch's (docs/expire-promotions-job.md#whose-fault).
var faultBySQLStateClass = map[string]fault{
	"22": rowFault,   // data exception: a value of the row
	"23": rowFault,   // integrity constraint violation: the row breaks a constraint
	"08": batchFault, // connection exception
	"25": batchFault, // invalid transaction state
	"40": batchFault, // transaction rollback: serialization failure, deadlock
	"42": batchFault, // access rule violation: 42501 privilege, 42P01 missing table
	"53": batchFault, // insufficient resources
	"55": batchFault, // object not in prerequisite state: 55P03 lock not available
	"57": batchFault, // operator intervention: 57014 statement timeout, shutdown
	"58": batchFault, // system error
	"P0": batchFault, // a PL/pgSQL RAISE without a data class: a trigger's verdict, not the data's
	"XX": batchFault, // internal error
}

// faultOf classifies err, an error of one row's own statement, by
// faultBySQLStateClass. An error that is not PostgreSQL's (the connection,
// the context) is the batch's.
func faultOf(err error) fault {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return batchFault
	}
	return faultBySQLStateClass[pgErr.Code[:2]]
}

// uuidStrings turns ids into the text form a uuid[] parameter accepts.
func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// CountPoison implements app.ExpireStore: the known poison purchases that
// are still Active (a cancelled one is no longer the job's concern).
func (r *ExpireRepository) CountPoison(ctx context.Context) (int, error) {
	var n int64
	err := r.db.WithContext(ctx).Table(expirePoisonTable+" AS x").
		Joins("JOIN "+purchasesTable+" AS p ON p.id = x.purchase_id").
		Where("p.status = ?", string(domain.StatusActive)).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count poison purchases: %w", err)
	}
	return int(n), nil
}

// CountDue implements app.ExpireStore. It is an index-only count on the
// partial index promotion_purchases_expiry_idx, cheap at the job's volume
// (1-10k Active purchases).
func (r *ExpireRepository) CountDue(ctx context.Context, asOf time.Time) (int, error) {
	var n int64
	err := r.db.WithContext(ctx).Model(&purchaseModel{}).
		Where("status = ? AND ends_at <= ?", string(domain.StatusActive), asOf).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count due purchases: %w", err)
	}
	return int(n), nil
}

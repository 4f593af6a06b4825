package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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
// slip between a transition and its event.
func (r *ExpireRepository) ExpireBatch(ctx context.Context, b app.ExpireBatch) (app.ExpireBatchResult, error) {
	if b.Limit <= 0 || b.Expire == nil {
		return app.ExpireBatchResult{}, errors.New("expire batch: a positive limit and an Expire func are required")
	}
	var res app.ExpireBatchResult
	err := postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		res = app.ExpireBatchResult{}
		rows, err := selectDue(tx.DB, b.AsOf, b.Limit, b.Exclude)
		if err != nil {
			return err
		}
		skipped, err := countSkippedLocked(ctx, tx, b, rows)
		if err != nil {
			return err
		}
		res.SkippedLocked = skipped
		retries, err := selectPoisonRetries(tx.DB, b.AsOf, PoisonRetrySlots(b.Limit), b.Exclude)
		if err != nil {
			return err
		}
		res.Retried = len(retries)
		rows = append(rows, retries...)
		res.Selected = len(rows)
		if b.Selected != nil {
			b.Selected(len(rows))
		}
		if len(rows) == 0 {
			return nil
		}

		ids := make([]uuid.UUID, len(rows))
		for i, m := range rows {
			ids[i] = m.ID
		}
		targets, err := loadExpiryTargets(ctx, tx, ids)
		if err != nil {
			return err
		}
		candidates, failed := prepareExpiries(ctx, r.events, rows, targets, b)
		res.Failed = append(res.Failed, failed...)

		written, failed, err := writeTransitions(ctx, tx, candidates)
		if err != nil {
			return err
		}
		res.Failed = append(res.Failed, failed...)
		if err := rememberPoison(ctx, tx, b.AsOf, written, res.Failed); err != nil {
			return err
		}
		events := make([][]*message.Message, len(written))
		for i, c := range written {
			events[i] = c.events
			res.Expired = append(res.Expired, c.purchase)
		}
		if err := r.events.publish(ctx, tx, r.outbox, events...); err != nil {
			return fmt.Errorf("publish expired events: %w", err)
		}
		return nil
	})
	if err != nil {
		return app.ExpireBatchResult{}, err
	}
	return res, nil
}

// knownPoison is true of a purchase the job has failed to expire before
// (promotion.expire_poison); such a purchase is left to the retry slot.
const knownPoison = `EXISTS (SELECT 1 FROM ` + expirePoisonTable + ` AS x WHERE x.purchase_id = ` + purchasesTable + `.id)`

// PoisonRetrySlots is how many known poison purchases a batch retries
// beyond its limit (a tenth, at least one): outside the limit, so poison
// never takes a healthy purchase's slot.
func PoisonRetrySlots(limit int) int { return max(limit/10, 1) }

// dueQuery selects a batch: due Active purchases that are not known poison,
// oldest first, FOR UPDATE SKIP LOCKED. WHERE and ORDER BY match the partial
// index promotion_purchases_expiry_idx, so Expired and Cancelled rows cost
// nothing.
func dueQuery(db *gorm.DB, asOf time.Time, limit int, exclude []uuid.UUID) *gorm.DB {
	q := db.Model(&purchaseModel{}).
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}).
		Where("status = ? AND ends_at <= ?", string(domain.StatusActive), asOf).
		Where("NOT " + knownPoison)
	if len(exclude) > 0 {
		q = q.Where("id NOT IN ?", exclude)
	}
	return q.Order("ends_at, id").Limit(limit)
}

// purchaseColumns are the columns of purchaseModel in the order selectDue
// scans them. A test compares them with the model, so a column
// added to the model cannot be silently left out of the job's events.
var purchaseColumns = []string{
	"id", "tenant_id", "package_id", "package_code", "package_kind", "boost_weight",
	"price_amount", "currency_id", "currency_iso_code", "currency_name", "currency_sign",
	"status", "payment_status", "starts_at", "ends_at", "cancel_reason",
	"created_by_user_id", "updated_by_user_id", "created_at", "updated_at", "version",
}

// selectDue runs dueQuery. It scans the rows itself rather than with Find:
// GORM's reflective scan of a full batch costs more than the query does.
func selectDue(db *gorm.DB, asOf time.Time, limit int, exclude []uuid.UUID) ([]purchaseModel, error) {
	rows, err := dueQuery(db, asOf, limit, exclude).Select(purchaseColumns).Rows()
	if err != nil {
		return nil, fmt.Errorf("select due purchases: %w", err)
	}
	return scanPurchases(rows, limit)
}

// poisonRetryQuery selects up to limit due purchases that are known
// poison, the least recently tried first (so every one of them is retried
// in turn), locked like the regular selection.
func poisonRetryQuery(db *gorm.DB, asOf time.Time, limit int, exclude []uuid.UUID) *gorm.DB {
	q := db.Table(purchasesTable+" AS p").
		Joins("JOIN "+expirePoisonTable+" AS x ON x.purchase_id = p.id").
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Table: clause.Table{Name: "p"}, Options: clause.LockingOptionsSkipLocked}).
		Where("p.status = ? AND p.ends_at <= ?", string(domain.StatusActive), asOf)
	if len(exclude) > 0 {
		q = q.Where("p.id NOT IN ?", exclude)
	}
	return q.Order("x.last_attempt_at, x.purchase_id").Limit(limit)
}

// selectPoisonRetries runs poisonRetryQuery.
func selectPoisonRetries(db *gorm.DB, asOf time.Time, limit int, exclude []uuid.UUID) ([]purchaseModel, error) {
	cols := make([]string, len(purchaseColumns))
	for i, c := range purchaseColumns {
		cols[i] = "p." + c
	}
	rows, err := poisonRetryQuery(db, asOf, limit, exclude).Select(cols).Rows()
	if err != nil {
		return nil, fmt.Errorf("select poison purchases to retry: %w", err)
	}
	return scanPurchases(rows, limit)
}

// rememberPoison records the batch's failures in promotion.expire_poison
// (one more failure, the last error and attempt) and forgets the purchases
// that did expire, in the batch's transaction.
func rememberPoison(ctx context.Context, tx postgres.Tx, asOf time.Time, written []expiryCandidate, failed []app.FailedExpiry) error {
	if len(written) > 0 {
		ids := make([]uuid.UUID, len(written))
		for i, c := range written {
			ids[i] = c.purchase.ID()
		}
		if _, err := tx.Exec.ExecContext(ctx, `DELETE FROM `+expirePoisonTable+` WHERE purchase_id = ANY($1::uuid[])`,
			uuidStrings(ids)); err != nil {
			return fmt.Errorf("forget expired poison purchases: %w", err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	ids, msgs := make([]uuid.UUID, len(failed)), make([]string, len(failed))
	for i, f := range failed {
		ids[i], msgs[i] = f.PurchaseID, f.Err.Error()
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

// scanPurchases reads rows of purchaseColumns and closes them.
func scanPurchases(rows *sql.Rows, limit int) ([]purchaseModel, error) {
	defer rows.Close()
	out := make([]purchaseModel, 0, limit)
	for rows.Next() {
		var m purchaseModel
		if err := rows.Scan(&m.ID, &m.TenantID, &m.PackageID, &m.PackageCode, &m.PackageKind, &m.BoostWeight,
			&m.PriceAmount, &m.CurrencyID, &m.CurrencyIsoCode, &m.CurrencyName, &m.CurrencySign,
			&m.Status, &m.PaymentStatus, &m.StartsAt, &m.EndsAt, &m.CancelReason,
			&m.CreatedByUserID, &m.UpdatedByUserID, &m.CreatedAt, &m.UpdatedAt, &m.Version); err != nil {
			return nil, fmt.Errorf("select due purchases: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("select due purchases: %w", err)
	}
	return out, nil
}

// loadExpiryTargets loads the targets of the whole batch in one query, each
// purchase's in position order: one uuid[] parameter rather than an IN list
// of a parameter per purchase. A purchase without targets is absent from the
// map (a poison item).
func loadExpiryTargets(ctx context.Context, tx postgres.Tx, ids []uuid.UUID) (map[uuid.UUID][]targetModel, error) {
	rows, err := tx.Exec.QueryContext(ctx, `SELECT purchase_id, target_kind, target_id, position
	FROM `+purchaseTargetsTable+`
	WHERE purchase_id = ANY($1::uuid[])
	ORDER BY purchase_id, position`, uuidStrings(ids))
	if err != nil {
		return nil, fmt.Errorf("load purchase targets: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID][]targetModel, len(ids))
	for rows.Next() {
		var t targetModel
		if err := rows.Scan(&t.PurchaseID, &t.TargetKind, &t.TargetID, &t.Position); err != nil {
			return nil, fmt.Errorf("load purchase targets: %w", err)
		}
		out[t.PurchaseID] = append(out[t.PurchaseID], t)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load purchase targets: %w", err)
	}
	return out, nil
}

// countSkippedLocked counts the due rows the selection passed over because
// another transaction held them. SKIP LOCKED does not say, so a plain read
// (which does not wait for locks) counts the window the selection scanned,
// capped at two batches of index entries, minus the batch's own rows.
func countSkippedLocked(ctx context.Context, tx postgres.Tx, b app.ExpireBatch, selected []purchaseModel) (int, error) {
	query := `SELECT count(*) FROM (
	SELECT 1 FROM ` + purchasesTable + `
	WHERE status = 'Active' AND ends_at <= $1 AND id <> ALL($2::uuid[]) AND NOT ` + knownPoison
	args := []any{b.AsOf, uuidStrings(b.Exclude)}
	if len(selected) == b.Limit {
		last := selected[len(selected)-1]
		query += ` AND (ends_at, id) <= ($3, $4::uuid)`
		args = append(args, last.EndsAt, last.ID.String())
	}
	query += fmt.Sprintf(`
	ORDER BY ends_at, id
	LIMIT %d
) AS window_rows`, b.Limit+len(selected))
	rows, err := tx.Exec.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("count skipped-locked purchases: %w", err)
	}
	defer rows.Close()
	var inWindow int
	if rows.Next() {
		if err := rows.Scan(&inWindow); err != nil {
			return 0, fmt.Errorf("count skipped-locked purchases: %w", err)
		}
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("count skipped-locked purchases: %w", err)
	}
	return max(inWindow-len(selected), 0), nil
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
	return expiryCandidate{transition: transition{purchase: p, previousVersion: previous}, events: msgs}, nil
}

// writeTransitions stores the candidates' transitions with
// transitionUpdate. The set-based statement runs inside a savepoint; if it
// fails on a row (a constraint, a trigger), each row is retried under its
// own savepoint, so the bad row is set aside and the others are kept. An
// error that is not about a row (the connection, the budget, a deadlock)
// aborts the batch.
func writeTransitions(ctx context.Context, tx postgres.Tx, cs []expiryCandidate) (written []expiryCandidate, failed []app.FailedExpiry, err error) {
	if len(cs) == 0 {
		return nil, nil, nil
	}
	setErr := inSavepoint(ctx, tx, "expire_batch", func() error {
		written, failed, err = updateSet(ctx, tx, cs)
		return err
	})
	if setErr == nil {
		return written, failed, nil
	}
	if !isRowError(setErr) {
		return nil, nil, setErr
	}
	written, failed = nil, nil
	for _, c := range cs {
		var w []expiryCandidate
		var f []app.FailedExpiry
		rowErr := inSavepoint(ctx, tx, "expire_item", func() error {
			var err error
			w, f, err = updateSet(ctx, tx, []expiryCandidate{c})
			return err
		})
		switch {
		case rowErr == nil:
			written, failed = append(written, w...), append(failed, f...)
		case isRowError(rowErr):
			failed = append(failed, app.FailedExpiry{PurchaseID: c.purchase.ID(), Err: rowErr})
		default:
			return nil, nil, rowErr
		}
	}
	return written, failed, nil
}

// updateSet writes cs's transitions in one statement and splits them into
// the rows it updated and those whose version had moved on.
func updateSet(ctx context.Context, tx postgres.Tx, cs []expiryCandidate) ([]expiryCandidate, []app.FailedExpiry, error) {
	ts := make([]transition, len(cs))
	for i, c := range cs {
		ts[i] = c.transition
	}
	idx, failed, err := writeTransitionSet(ctx, tx, ts)
	if err != nil {
		return nil, nil, err
	}
	written := make([]expiryCandidate, len(idx))
	for i, j := range idx {
		written[i] = cs[j]
	}
	return written, failed, nil
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

// isRowError reports whether err is PostgreSQL refusing a row's data (a
// constraint, a trigger) rather than the infrastructure failing (SQLSTATE
// classes 08, 25, 40, 53, 57, 58, XX, or the context).
func isRowError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "57", "58", "XX", "25":
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
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

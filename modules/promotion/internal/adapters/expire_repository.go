package adapters

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
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
	// session is the batch transaction's first statement (batchSession).
	session string
	// write is the set-based write: expireWriteHead with the outbox's half.
	write *outbox.Change
}

// ExpireTimeouts bound each batch's transaction on the server, so that a
// batch lets go of its rows whatever blocks it, even when its client is
// frozen or gone (docs/adr/0014-expiry-batch-bounded-in-time.md). Hitting
// one rolls the batch back whole: a fault of the database, never poison.
type ExpireTimeouts struct {
	// Lock is lock_timeout: a wait for any one lock (55P03).
	Lock time.Duration
	// Statement is statement_timeout: any one statement, its lock waits
	// included (57014).
	Statement time.Duration
	// IdleInTransaction is idle_in_transaction_session_timeout: the server
	// ends the session of a client silent between two statements (25P03).
	IdleInTransaction time.Duration
}

// DefaultExpireTimeouts fit the default 30 s cycle budget: a blocked batch
// lets go within a third of it (5 s for a lock, 10 s for a statement), and a
// frozen job holds its rows 5 s after its last statement. A batch of the
// largest size (10 000) takes about a second.
var DefaultExpireTimeouts = ExpireTimeouts{Lock: 5 * time.Second, Statement: 10 * time.Second, IdleInTransaction: 5 * time.Second}

// batchSession sets the batch transaction's timeouts, and its plan cache
// mode: the batch's statements plan the same for any parameters, and a
// custom plan per batch cost more than running the selection
// (performance.md). One round trip: without parameters pgx sends it as
// one simple query.
func batchSession(t ExpireTimeouts) string {
	return fmt.Sprintf(`SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL lock_timeout = %d; `+
		`SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d`,
		t.Lock.Milliseconds(), t.Statement.Milliseconds(), t.IdleInTransaction.Milliseconds())
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
	write, err := events.change("expire_write", expireWriteHead, "updated")
	if err != nil {
		return nil, err
	}
	return &ExpireRepository{db: db, outbox: publisher, events: events, session: batchSession(DefaultExpireTimeouts), write: write}, nil
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
// BEGIN, SET LOCAL (timeouts, batchSession), one selection, one write
// (transitions, events, poison forgotten), COMMIT. When the set-based write
// may have failed for a row's data (ownRefusal), the batch is rolled back
// and done again with a savepoint per row, so only that row is set aside;
// any other error rolls it back whole, and so does a redo in which every
// due row was refused alike (app.RefusedAlike).
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
		if _, err := tx.ExecContext(ctx, r.session); err != nil {
			return fmt.Errorf("set the batch's timeouts: %w", err)
		}
		sel, err := selectBatch(ctx, tx, b)
		if err != nil {
			return err
		}
		res.SkippedLocked, res.Retried, res.Selected, res.KeptForPoison = sel.skipped, len(sel.retries), len(sel.rows), sel.kept
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
			if err == nil {
				err = refusedAlike(candidates, failed, sel.retries)
			}
		} else {
			written, unwritten, err = r.writeSet(ctx, tx, candidates, len(sel.retries) > 0)
			if err != nil && ownRefusal(err) {
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

// ownRefusal reports whether err, raised by a statement that writes rows of
// the purchases table, may be one row's fault: a data-class error
// (postgres.FaultOf) that names that table or none. Any other table's (the
// outbox's insert, a trigger's write elsewhere) is the batch's.
func ownRefusal(err error) bool {
	r, _ := postgres.RefusalOf(err)
	return postgres.FaultOf(err) == postgres.FaultOfData && (r.Table == "" || r.Table == purchasesTable)
}

// refusedAlike applies app.RefusedAlike to the due rows of a row-by-row
// write: known poison retried is left out, it is known to fail.
func refusedAlike(cs []expiryCandidate, refused []app.FailedExpiry, retries map[uuid.UUID]bool) error {
	tried := 0
	for _, c := range cs {
		if !retries[c.purchase.ID()] {
			tried++
		}
	}
	due := make([]app.FailedExpiry, 0, len(refused))
	for _, f := range refused {
		if !retries[f.PurchaseID] {
			due = append(due, f)
		}
	}
	return app.RefusedAlike(tried, due)
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
	msgs, ev, err := events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return expiryCandidate{}, err
	}
	return expiryCandidate{transition: transition{purchase: p, previousVersion: previous, loaded: &m, event: ev}, events: msgs}, nil
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

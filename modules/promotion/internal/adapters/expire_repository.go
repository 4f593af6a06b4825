package adapters

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// ExpireRepository is the expiry job's storage (expiry.ExpireBatchStorage):
// in one transaction bounded in time, it selects due purchases with their
// rows locked, builds their events, and writes a batch of transitions and
// their events as one statement, or row by row. What a batch does with
// each row is expiry.ExpireBatches' policy.
type ExpireRepository struct {
	db     *gorm.DB
	outbox *outbox.Publisher
	events Publications
	// timeouts are batchSession's parameters.
	timeouts pgx.NamedArgs
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
	// Unread is tcp_user_timeout: the server ends the session of a client
	// that stops reading what it is sent (its TCP window shut), where the
	// backend waits in ClientWrite and no statement or idle bound applies.
	Unread time.Duration
}

// DefaultExpireTimeouts hold a stuck batch's rows (HoldBound, 6 s) for less
// than a cancel waits for one (cancelLockWait), inside the API's 10 s request
// deadline (ADR 0014; the largest batch's timings are in performance.md).
var DefaultExpireTimeouts = ExpireTimeouts{Lock: 5 * time.Second, Statement: 6 * time.Second, IdleInTransaction: 5 * time.Second,
	Unread: 2 * time.Second}

// HoldBound is the longest a batch within t holds its rows when one of its
// steps is stuck: a statement running (Statement, its lock waits included),
// its client silent (IdleInTransaction), or its selection's rows unread
// (Unread, after the selection ran: well inside Statement at any allowed
// batch size). Its other steps take milliseconds.
func (t ExpireTimeouts) HoldBound() time.Duration { return max(t.Statement, t.IdleInTransaction) }

// batchSession is the batch transaction's first statement: its timeouts
// (@lock_timeout, @statement_timeout, @idle_in_transaction_session_timeout,
// @tcp_user_timeout, in milliseconds; ExpireTimeouts.args) and its plan cache mode: the batch's
// statements plan the same for any parameters, and a custom plan per batch
// cost more than running the selection (performance.md). set_config's true
// makes each a SET LOCAL, gone with the transaction.
const batchSession = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('lock_timeout', @lock_timeout, true),
	set_config('statement_timeout', @statement_timeout, true),
	set_config('idle_in_transaction_session_timeout', @idle_in_transaction_session_timeout, true),
	set_config('tcp_user_timeout', @tcp_user_timeout, true)`

// args are batchSession's parameters for t.
func (t ExpireTimeouts) args() pgx.NamedArgs {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return pgx.NamedArgs{"lock_timeout": ms(t.Lock), "statement_timeout": ms(t.Statement),
		"idle_in_transaction_session_timeout": ms(t.IdleInTransaction), "tcp_user_timeout": ms(t.Unread)}
}

// frozenClientArgs are t's bounds on a frozen client alone, named as in
// batchSession: for the other transactions that hold purchases (a cancel, a
// snapshot batch).
func (t ExpireTimeouts) frozenClientArgs() pgx.NamedArgs {
	all := t.args()
	return pgx.NamedArgs{"idle_in_transaction_session_timeout": all["idle_in_transaction_session_timeout"],
		"tcp_user_timeout": all["tcp_user_timeout"]}
}

var _ expiry.ExpireBatchStorage = (*ExpireRepository)(nil)

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
	return &ExpireRepository{db: db, outbox: publisher, events: events, timeouts: DefaultExpireTimeouts.args()}, nil
}

// InBatch implements expiry.ExpireBatchStorage. A batch of up to ExpireWriteChunk
// purchases is five round trips: BEGIN, the batch's settings
// (batchSession), one selection, one write (transitions, events, poison
// forgotten), COMMIT; a larger one has a write per ExpireWriteChunk.
func (r *ExpireRepository) InBatch(ctx context.Context, fn func(expiry.ExpireTx) error) error {
	return postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		if _, err := tx.ExecContext(ctx, batchSession, r.timeouts); err != nil {
			return fmt.Errorf("set the batch's timeouts: %w", err)
		}
		return fn(&expireTx{r: r, tx: tx})
	})
}

// expireTx is one batch's transaction: what it locked, and the events
// Prepare built for it.
type expireTx struct {
	r      *ExpireRepository
	tx     postgres.Tx
	loaded map[uuid.UUID]*purchaseModel
	events map[uuid.UUID]prepared
}

// prepared is an expiry's events, one per publication, and what its row
// keeps of them.
type prepared struct {
	msgs []*message.Message
	last lastEvent
}

// Select implements expiry.ExpireTx.
func (t *expireTx) Select(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireSelection, error) {
	sel, err := selectBatch(ctx, t.tx, b)
	if err != nil {
		return expiry.ExpireSelection{}, err
	}
	out := expiry.ExpireSelection{Retried: len(sel.retries), SkippedLocked: sel.skipped, KeptForPoison: sel.kept,
		Locked: make([]expiry.LockedPurchase, 0, len(sel.rows))}
	t.loaded = make(map[uuid.UUID]*purchaseModel, len(sel.rows))
	for i, m := range sel.rows {
		p, err := toDomainPurchase(m, sel.targets[m.ID])
		if err != nil {
			out.Failed = append(out.Failed, expiry.FailedExpiry{PurchaseID: m.ID, Err: err})
			continue
		}
		t.loaded[m.ID] = &sel.rows[i]
		out.Locked = append(out.Locked, expiry.LockedPurchase{Purchase: p, Retry: sel.retries[m.ID]})
	}
	return out, nil
}

// parallelPrepareMin is the batch size from which events are built on
// several goroutines.
const parallelPrepareMin = 32

// Prepare implements expiry.ExpireTx: on GOMAXPROCS goroutines for a large
// batch, building the events is most of a batch's CPU time.
func (t *expireTx) Prepare(ctx context.Context, es []expiry.Expiry) ([]expiry.Expiry, []expiry.FailedExpiry) {
	built := make([]prepared, len(es))
	errs := make([]error, len(es))
	workers := min(runtime.GOMAXPROCS(0), len(es)/(parallelPrepareMin/2))
	if len(es) < parallelPrepareMin || workers < 2 {
		workers = 1
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(es); i += workers {
				built[i], errs[i] = t.r.prepare(ctx, es[i].Purchase)
			}
		})
	}
	wg.Wait()
	t.events = make(map[uuid.UUID]prepared, len(es))
	ready := make([]expiry.Expiry, 0, len(es))
	var failed []expiry.FailedExpiry
	for i, ex := range es {
		if errs[i] != nil {
			failed = append(failed, expiry.FailedExpiry{PurchaseID: ex.Purchase.ID(), Err: errs[i]})
			continue
		}
		t.events[ex.Purchase.ID()] = built[i]
		ready = append(ready, ex)
	}
	return ready, failed
}

// prepare builds p's events. A panic becomes the purchase's error: on a
// worker goroutine it would end the process, and it concerns p only.
func (r *ExpireRepository) prepare(ctx context.Context, p *domain.Purchase) (out prepared, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = prepared{}, fmt.Errorf("purchase %s: panic while building its event: %v", p.ID(), v)
		}
	}()
	// occurredAt is the transition's moment: UpdatedAt, which Expire set to
	// the cycle's AsOf.
	msgs, last, err := r.events.messages(ctx, p, p.UpdatedAt())
	return prepared{msgs: msgs, last: last}, err
}

// transition is ex as the transition statement writes it.
func (t *expireTx) transition(ex expiry.Expiry) transition {
	return transition{purchase: ex.Purchase, previousVersion: ex.PreviousVersion, loaded: t.loaded[ex.Purchase.ID()],
		event: t.events[ex.Purchase.ID()].last}
}

// CountBacklog implements expiry.ExpireBatchStorage by backlogQuery, after
// each cycle (not at every scrape).
func (r *ExpireRepository) CountBacklog(ctx context.Context, asOf time.Time) (expiry.ExpireBacklog, error) {
	b, err := readBacklog(ctx, r.db.WithContext(ctx).ConnPool, &asOf)
	if err != nil {
		return expiry.ExpireBacklog{}, err
	}
	return expiry.ExpireBacklog{Due: b.due - b.poison, Poison: b.poison}, nil
}

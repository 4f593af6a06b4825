package adapters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// ErrVersionConflict means a purchase row no longer had the version it was
// loaded with when its change was written: someone else changed it first.
var ErrVersionConflict = errors.New("purchase version conflict")

// cancelLockWait bounds how long a cancellation waits for a purchase row
// another transaction holds: longer than an expiry batch within its bounds
// may hold it, so a batch never makes a cancel 409 purchase-busy; past it (a
// lock held by hand) the request gets a 409 to retry (ADR 0014, decision 8).
var cancelLockWait = DefaultExpireTimeouts.HoldBound() + time.Second

// cancelStatementTimeout outlasts cancelLockWait, so the wait ends as a
// lock timeout (55P03, a 409) rather than the API session's statement
// timeout, and stays inside the API's request deadline (10 s).
var cancelStatementTimeout = cancelLockWait + time.Second

// updateSession is the first statement of a cancel's transaction (set_config's
// true: SET LOCAL), set here whatever pool the caller is on: its waits, and
// the expiry batch's bounds on a frozen client (ADR 0014, decision 9).
const updateSession = `SELECT set_config('lock_timeout', @lock_timeout, true),
	set_config('statement_timeout', @statement_timeout, true),
	set_config('idle_in_transaction_session_timeout', @idle_in_transaction_session_timeout, true),
	set_config('tcp_user_timeout', @tcp_user_timeout, true)`

// updateSessionArgs are updateSession's parameters, in milliseconds.
var updateSessionArgs = func() pgx.NamedArgs {
	args := DefaultExpireTimeouts.frozenClientArgs()
	args["lock_timeout"] = strconv.FormatInt(cancelLockWait.Milliseconds(), 10)
	args["statement_timeout"] = strconv.FormatInt(cancelStatementTimeout.Milliseconds(), 10)
	return args
}()

// PurchaseRepository stores purchases in promotion.promotion_purchases and
// .promotion_purchase_targets, and puts the purchase-changed event of every
// write into the outbox of each of its publications in the same transaction.
type PurchaseRepository struct {
	db     *gorm.DB
	outbox *outbox.Publisher
	events Publications
	// packages are guesses of the packages purchases are built from.
	packages packageCache
}

var _ app.PurchaseRepository = (*PurchaseRepository)(nil)

// NewPurchaseRepository returns the repository. It publishes each event to
// publications, PurchaseChangedV1 alone when none is given.
func NewPurchaseRepository(db *gorm.DB, publisher *outbox.Publisher, publications ...Publication) (*PurchaseRepository, error) {
	if db == nil || publisher == nil {
		return nil, errors.New("adapters: purchase repository needs a database and an outbox publisher")
	}
	events, err := publicationsOrV1(publications)
	if err != nil {
		return nil, err
	}
	return &PurchaseRepository{db: db, outbox: publisher, events: events}, nil
}

// Add stores a new purchase and its event, claiming the idempotency key
// when claim is not nil. The claim, the purchase, its targets and its
// events are one statement (insertPurchaseQuery), autocommitted: one round
// trip. It locks the package FOR SHARE and writes nothing unless the
// package still is the one the purchase was built from, and the key was
// free: a deactivation (or any edit) that holds the package makes the
// purchase wait and then see its result, and one that comes later waits
// for the purchase to commit (ADR-0004). A racing claim of the same key
// waits until the first request ends; when that one committed, Add stores
// nothing and returns app.ErrIdempotencyKeyTaken.
//
// One route: build on the package the repository knows (cached, else
// read), run the statement. When it wrote nothing, the package changed
// since it was known (an edit, or a deactivation the statement waited
// for): forget it, read it again and take the route once more, so build
// sees what was committed, and refuses an inactive package. build runs at
// most three times (the cached package, then two reads); a package that
// changes under both reads answers 409 package-changed.
func (r *PurchaseRepository) Add(ctx context.Context, packageID uuid.UUID, claim *app.IdempotencyRecord,
	build func(*domain.Package) (*domain.Purchase, error)) (*domain.Purchase, error) {
	tx, err := postgres.Autocommit(r.db.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	for reads, cached := 0, true; ; cached = false {
		b, fresh, err := r.built(ctx, packageID, build, cached)
		if err != nil {
			return nil, err
		}
		inserted, err := r.insert(ctx, tx, b, claim)
		if err != nil {
			return nil, err
		}
		if inserted {
			return b.purchase, nil
		}
		if claim != nil {
			rec, err := r.FindIdempotencyKey(ctx, claim.TenantID, claim.Key)
			if err != nil {
				return nil, err
			}
			if rec != nil {
				return nil, app.ErrIdempotencyKeyTaken
			}
		}
		r.packages.forget(packageID)
		if fresh {
			reads++
		}
		if reads == maxPackageReads {
			return nil, &apperror.Error{Kind: apperror.KindConflict, Slug: "package-changed",
				Detail: "The package changed while the purchase was being made; try again.",
				Err:    fmt.Errorf("insert purchase %s: package %s changed under %d reads", b.purchase.ID(), packageID, reads)}
		}
	}
}

// maxPackageReads bounds Add's reads of a package that keeps changing
// under its statement.
const maxPackageReads = 2

// FindIdempotencyKey returns the record of a tenant's key, or nil.
func (r *PurchaseRepository) FindIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (*app.IdempotencyRecord, error) {
	var m idempotencyKeyModel
	err := r.db.WithContext(ctx).Where("tenant_id = ? AND key = ?", tenantID, key).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find idempotency key: %w", err)
	}
	return toAppIdempotencyRecord(m), nil
}

// Get returns the purchase with its targets.
func (r *PurchaseRepository) Get(ctx context.Context, id uuid.UUID) (*domain.Purchase, error) {
	db := r.db.WithContext(ctx)
	var m purchaseModel
	err := db.Where("id = ?", id).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, domain.PurchaseNotFound(id.String())
	}
	if err != nil {
		return nil, fmt.Errorf("get purchase %s: %w", id, err)
	}
	targets, err := loadTargets(db, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	return toDomainPurchase(m, targets[id])
}

// List returns a page of a tenant's purchases, newest first. The order
// (created_at desc, id desc) is total, so the keyset condition on the same
// pair never repeats or skips a row between pages; the index
// promotion_purchases_tenant_list_idx serves it.
func (r *PurchaseRepository) List(ctx context.Context, q app.PurchaseListQuery) ([]*domain.Purchase, error) {
	db := r.db.WithContext(ctx)
	query := db.Where("tenant_id = ?", q.TenantID)
	if q.Status != "" {
		query = query.Where("status = ?", string(q.Status))
	}
	if q.After != nil {
		query = query.Where("(created_at, id) < (?, ?)", q.After.CreatedAt, q.After.ID)
	}
	var rows []purchaseModel
	if err := query.Order("created_at DESC, id DESC").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list purchases: %w", err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, m := range rows {
		ids[i] = m.ID
	}
	targets, err := loadTargets(db, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*domain.Purchase, len(rows))
	for i, m := range rows {
		if out[i], err = toDomainPurchase(m, targets[m.ID]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdatePurchase runs update on the purchase inside one transaction: the
// row is read with SELECT ... FOR UPDATE (waiting, not skipping: an API
// caller wants an answer, and after the wait it sees the committed result of
// whoever held the lock), then update runs, then — if update made a
// transition — the row is written with a version check and the event goes
// into the outbox. An error from update rolls back and is returned as is.
func (r *PurchaseRepository) UpdatePurchase(ctx context.Context, id uuid.UUID, update func(*domain.Purchase) error) error {
	return postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		if _, err := tx.ExecContext(ctx, updateSession, updateSessionArgs); err != nil {
			return fmt.Errorf("set the cancel's timeouts: %w", err)
		}
		var m purchaseModel
		err := tx.GORM().Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("id = ?", id).Take(&m).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return domain.PurchaseNotFound(id.String())
		case isLockNotAvailable(err):
			return &apperror.Error{Kind: apperror.KindConflict, Slug: "purchase-busy",
				Detail: "The purchase is being changed by another operation; try again.", Err: err}
		case err != nil:
			return fmt.Errorf("lock purchase %s: %w", id, err)
		}
		targets, err := loadTargets(tx.GORM(), []uuid.UUID{id})
		if err != nil {
			return err
		}
		p, err := toDomainPurchase(m, targets[id])
		if err != nil {
			return err
		}
		previous := p.Version()
		if err := update(p); err != nil {
			return err
		}
		if p.Version() == previous {
			return nil // nothing happened, nothing to announce
		}
		return r.saveTransition(ctx, tx, p, previous)
	})
}

// saveTransition writes a transition of p, which was loaded at
// previousVersion, and its event by the statement the expiry batch uses too
// (transitionQuery), inside tx. If the row moved on since it was read,
// nothing is written, no event stored, and the error wraps
// ErrVersionConflict (an apperror conflict).
func (r *PurchaseRepository) saveTransition(ctx context.Context, tx postgres.Tx, p *domain.Purchase, previousVersion int64) error {
	msgs, ev, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return err
	}
	ids, err := r.events.writeTransitions(ctx, tx, r.outbox,
		[]transition{{purchase: p, previousVersion: previousVersion, event: ev}}, [][]*message.Message{msgs}, false)
	if err != nil {
		return fmt.Errorf("update purchase %s: %w", p.ID(), err)
	}
	if len(ids) == 0 {
		return &apperror.Error{Kind: apperror.KindConflict, Slug: "purchase-version-conflict",
			Detail: fmt.Sprintf("Purchase %s was changed concurrently; reload it and try again.", p.ID()),
			Err:    ErrVersionConflict}
	}
	return nil
}

// loadTargets returns the target rows of the purchases, each purchase's in
// position order. A purchase without rows is absent from the map.
func loadTargets(db *gorm.DB, purchaseIDs []uuid.UUID) (map[uuid.UUID][]targetModel, error) {
	out := make(map[uuid.UUID][]targetModel, len(purchaseIDs))
	if len(purchaseIDs) == 0 {
		return out, nil
	}
	var rows []targetModel
	if err := db.Where("purchase_id IN ?", purchaseIDs).Order("purchase_id, position").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load purchase targets: %w", err)
	}
	for _, t := range rows {
		out[t.PurchaseID] = append(out[t.PurchaseID], t)
	}
	return out, nil
}

package adapters

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestHotStatementsPlanWithoutJIT is the promotion module's plan guard
// (ADR 0013): on 10k, 100k and 1M purchases, never analyzed (as after a
// restore or a pg_upgrade), analyzed, and with the targets alone
// unanalyzed, each hot statement, as the code builds it, plans without JIT
// and through its index, in its custom plan and in the generic one (the
// expiry batch forces generic plans; a prepared statement may switch to it
// after five runs). The plans come from a session of the pool testbed opens
// with postgres.Open: the service's session settings.
func TestHotStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	for _, size := range testbed.PlanSizes() {
		t.Run("purchases="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			asOf := time.Now().UTC().Truncate(time.Microsecond)
			pkg := promotiontest.SeedBacklog(t, db, size, min(10_000, size/2), asOf)
			statements := hotStatements(t, db, pkg, asOf)
			for _, stats := range []string{"none", "analyzed", "targets-none"} {
				switch stats {
				case "analyzed":
					testbed.Analyze(t, db.SQL, purchasesTable, purchaseTargetsTable, expirePoisonTable, packagesTable, currenciesTable)
				case "targets-none": // the state: the targets table alone never analyzed
					testbed.ClearStatistics(t, db.SQL, purchaseTargetsTable)
				}
				t.Run("stats="+stats, func(t *testing.T) {
					for _, s := range statements {
						custom, generic := testbed.Explain(t, db.SQL, s.Statement)
						plans := []testbed.Plan{custom, generic}
						if s.genericOnly {
							plans = plans[1:]
						}
						for _, p := range plans {
							t.Logf("%s: %s", s.name, p)
							testbed.CheckPlan(t, s.name, p, testbed.PlanWant{Index: s.index, InOrder: true,
								NoSeqScan: []string{"promotion_purchases", "promotion_purchase_targets"}})
						}
					}
				})
			}
		})
	}
}

// hotStatement is one statement the code sent, with its parameters and the
// index its plan must read in order (an Index Scan, not a bitmap), if any.
type hotStatement struct {
	testbed.Statement
	name  string
	index string
	// genericOnly: the code runs it under plan_cache_mode =
	// force_generic_plan (expireBatch), so its custom plan never runs.
	genericOnly bool
}

// hotStatements runs an expiry batch's selection and set-based write, a
// purchase's insert and a snapshot's selection as the repositories do, in
// transactions rolled back, and returns the statements they sent.
func hotStatements(tb testing.TB, db *testbed.Database, pkgID uuid.UUID, asOf time.Time) []hotStatement {
	tb.Helper()
	publisher := promotiontest.Publisher(tb, nil)
	repo, err := NewExpireRepository(db.Gorm, publisher)
	require.NoError(tb, err)
	purchases, err := NewPurchaseRepository(db.Gorm, publisher)
	require.NoError(tb, err)
	var out []hotStatement
	// record runs fn and keeps the last statement it sent, the settings
	// before it (SET LOCAL, set_config) as its setup.
	record := func(name, index string, fn func(ctx context.Context) error) {
		rec := &recordedStatement{}
		ctx := postgres.WithStatementObserver(context.WithValue(context.Background(), recorderKey{}, rec), rec.record)
		require.ErrorIs(tb, fn(ctx), errRolledBack)
		require.NotEmpty(tb, rec.last.Query, name)
		rec.last.name, rec.last.index = name, index
		rec.last.genericOnly = strings.HasPrefix(name, "expiry ")
		out = append(out, rec.last)
	}
	inTx := func(ctx context.Context, fn func(tx postgres.Tx) error) error {
		return postgres.InTx(ctx, db.Gorm, func(tx postgres.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRolledBack
		})
	}

	// The selection and the write share one batch transaction: the write
	// needs what the selection locked. Each is recorded as it returns.
	b := expiry.ExpireBatch{AsOf: asOf, Limit: 200, Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }}
	record("expiry write", "", func(ctx context.Context) error {
		rec := ctx.Value(recorderKey{}).(*recordedStatement)
		return repo.InBatch(ctx, func(tx expiry.ExpireTx) error {
			sel, err := tx.Select(ctx, b)
			if err != nil {
				return err
			}
			selection := rec.last
			selection.name, selection.index, selection.genericOnly = "expiry select", "promotion_purchases_expiry_idx", true
			out = append(out, selection)
			rec.last = hotStatement{Statement: testbed.Statement{Setup: selection.Setup}}
			var expiries []expiry.Expiry
			for _, l := range sel.Locked {
				previous := l.Purchase.Version()
				if err := b.Expire(l.Purchase); err != nil {
					return err
				}
				expiries = append(expiries, expiry.Expiry{Purchase: l.Purchase, PreviousVersion: previous})
			}
			require.Len(tb, expiries, b.Limit)
			ready, failed := tx.Prepare(ctx, expiries)
			require.Empty(tb, failed)
			if _, err := tx.WriteAll(ctx, ready, true); err != nil {
				return err
			}
			return errRolledBack
		})
	})
	record("purchase insert", "", func(ctx context.Context) error {
		return inTx(ctx, func(tx postgres.Tx) error {
			built, _, err := purchases.built(ctx, pkgID, func(pkg *domain.Package) (*domain.Purchase, error) {
				return domain.NewPurchase(domain.NewPurchaseParams{
					ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: pkg,
					Targets: []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}}, Now: time.Now(),
				})
			}, false)
			if err != nil {
				return err
			}
			_, err = purchases.insert(ctx, tx, built, nil)
			return err
		})
	})
	record("snapshot select", "promotion_purchases_pkey", func(ctx context.Context) error {
		return inTx(ctx, func(tx postgres.Tx) error {
			_, _, err := selectSnapshotBatch(ctx, tx, app.SnapshotBatch{SnapshotID: uuid.New(), Limit: 100})
			return err
		})
	})
	return out
}

var errRolledBack = errors.New("rolled back")

// recorderKey hands record's recorder to a statement run that records two.
type recorderKey struct{}

// recordedStatement keeps the last statement the code sent, with the
// settings it made before it (SET, set_config) as its setup.
type recordedStatement struct {
	last hotStatement
}

func (r *recordedStatement) record(query string, args []any) {
	setup := r.last.Setup
	if q := strings.TrimSpace(r.last.Query); strings.HasPrefix(q, "SET ") || strings.HasPrefix(q, "SELECT set_config(") {
		setup = append(setup, testbed.Statement{Query: r.last.Query, Args: r.last.Args})
	}
	r.last = hotStatement{Statement: testbed.Statement{Setup: setup, Query: query, Args: args}}
}

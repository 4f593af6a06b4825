package adapters_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// snapshotBundle is a snapshot store and a purchase repository on a fresh
// database with a project and a post package.
type snapshotBundle struct {
	db            *testbed.Database
	store         *adapters.SnapshotRepository
	purchases     *adapters.PurchaseRepository
	project, post promotiontest.Package
}

func newSnapshotBundle(tb testing.TB) *snapshotBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	store, err := adapters.NewSnapshotRepository(db.Gorm, promotiontest.Publisher(tb, nil))
	require.NoError(tb, err)
	purchases, err := adapters.NewPurchaseRepository(db.Gorm, promotiontest.Publisher(tb, nil))
	require.NoError(tb, err)
	pkg := func(kind domain.PackageKind, weight int) promotiontest.Package {
		return promotiontest.InsertPackage(tb, db, promotiontest.Package{
			Code: "snapshot-" + strings.ToLower(uuid.NewString()[:8]), Name: "Snapshot test week",
			Kind: kind, DurationDays: 7, BoostWeight: weight, Price: decimal.RequireFromString("990.50"),
		})
	}
	return &snapshotBundle{db: db, store: store, purchases: purchases,
		project: pkg(domain.PackageKindProjectBoost, 10), post: pkg(domain.PackageKindPostBoost, 3)}
}

// run snapshots f and returns the run's result and the events it wrote, in
// outbox order.
func (b *snapshotBundle) run(tb testing.TB, f app.SnapshotFilter) (app.SnapshotProgress, []promotiontest.OutboxEvent) {
	tb.Helper()
	res, err := app.NewSnapshotHandler(b.store, nil).Handle(context.Background(),
		app.SnapshotCommand{Filter: f, Rate: 100000, BatchSize: 2}, ignoreSnapshotReports{})
	require.NoError(tb, err)
	require.True(tb, res.Complete)
	return res, b.snapshotEvents(tb, res.SnapshotID)
}

// snapshotEvents are the outbox's events of one snapshot run.
func (b *snapshotBundle) snapshotEvents(tb testing.TB, id uuid.UUID) []promotiontest.OutboxEvent {
	tb.Helper()
	var out []promotiontest.OutboxEvent
	for _, e := range promotiontest.OutboxEvents(tb, b.db) {
		if e.Metadata[kafka.MetaCorrelationID] == id.String() {
			out = append(out, e)
		}
	}
	return out
}

// setTenant gives the purchases one tenant.
func (b *snapshotBundle) setTenant(tb testing.TB, tenant uuid.UUID, ids ...uuid.UUID) {
	tb.Helper()
	_, err := b.db.SQL.Exec(`UPDATE promotion.promotion_purchases SET tenant_id = $1 WHERE id = ANY($2::uuid[])`,
		tenant, uuidTexts(ids))
	require.NoError(tb, err)
}

// cancel cancels a purchase through the repository, as the API does;
// during runs inside its transaction, with the row locked, before the
// transition.
func (b *snapshotBundle) cancel(ctx context.Context, id uuid.UUID, during func()) error {
	return b.purchases.UpdatePurchase(ctx, id, func(p *domain.Purchase) error {
		if during != nil {
			during()
		}
		return p.Cancel("snapshot test", uuid.New(), time.Now())
	})
}

// start stores a new snapshot of f, for tests that run its batches one by one.
func (b *snapshotBundle) start(tb testing.TB, f app.SnapshotFilter) uuid.UUID {
	tb.Helper()
	id := uuid.New()
	require.NoError(tb, b.store.StartSnapshot(context.Background(), app.SnapshotRun{ID: id, Filter: f}))
	return id
}

// buy adds a purchase of pkg through the repository, as the API does: with
// its Active event in the outbox.
func (b *snapshotBundle) buy(tb testing.TB, pkg promotiontest.Package) uuid.UUID {
	tb.Helper()
	p, err := b.purchases.Add(context.Background(), pkg.ID, nil, func(row *domain.Package) (*domain.Purchase, error) {
		return domain.NewPurchase(domain.NewPurchaseParams{
			ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: row,
			Targets: []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}}, Now: time.Now(),
		})
	})
	require.NoError(tb, err)
	return p.ID()
}

type ignoreSnapshotReports struct{}

func (ignoreSnapshotReports) Started(app.SnapshotProgress)    {}
func (ignoreSnapshotReports) Progress(app.SnapshotProgress)   {}
func (ignoreSnapshotReports) Failed(app.FailedSnapshot)       {}
func (ignoreSnapshotReports) UnknownID(app.UnknownIDSnapshot) {}

func uuidTexts(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func purchaseIDsOf(events []promotiontest.OutboxEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.Envelope.AggregateID
	}
	return out
}

func sortedIDs(ids ...[]uuid.UUID) []uuid.UUID {
	out := slices.Concat(ids...)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// TestSnapshotWritesEachPurchaseAtItsStoredState: one event per Active
// purchase in id order, each as a transition's event of the purchase's
// stored state and version, valid by the contract, with
// event_origin=snapshot and the run's id as correlation_id, under the
// messageId and occurredAt its row keeps; the ended ones get none. A second
// run redelivers the same records.
func TestSnapshotWritesEachPurchaseAtItsStoredState(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	active := promotiontest.InsertPurchases(t, b.db, b.project, 3, promotiontest.Purchases{Targets: 2})
	promotiontest.InsertPurchases(t, b.db, b.project, 1, promotiontest.Purchases{Status: domain.StatusCancelled})
	promotiontest.InsertPurchases(t, b.db, b.project, 1, promotiontest.Purchases{Status: domain.StatusExpired})

	res, events := b.run(t, app.SnapshotFilter{})
	require.Equal(t, 3, res.Events)
	require.Zero(t, res.SkippedUnknownID)
	require.Equal(t, sortedIDs(active), purchaseIDsOf(events), "the Active ones, in id order")
	require.Equal(t, events[2].Envelope.AggregateID, res.After)
	for _, e := range events {
		require.Equal(t, contract.EventOriginSnapshot, e.Metadata[kafka.MetaEventOrigin])
		require.Equal(t, res.SnapshotID.String(), e.Metadata[kafka.MetaCorrelationID])
		require.Equal(t, e.Envelope.AggregateID.String(), e.Metadata[kafka.MetaPartitionKey])
		require.Equal(t, contract.EventType, e.Metadata[kafka.MetaEventType])
		require.Equal(t, e.MessageID, e.Envelope.MessageID.String())
		require.NoError(t, e.Envelope.Validate())
		testbed.RequireValidJSON(t, contract.JSONSchema(), e.Raw)

		var status string
		var version int64
		var lastEventID uuid.UUID
		var lastEventAt time.Time
		require.NoError(t, b.db.SQL.QueryRow(`SELECT status, version, last_event_id, last_event_at
			FROM promotion.promotion_purchases WHERE id = $1`, e.Envelope.AggregateID).Scan(&status, &version, &lastEventID, &lastEventAt))
		require.Equal(t, contract.Status(status), e.Envelope.Payload.Status)
		require.Equal(t, version, e.Envelope.Payload.Version, "the stored version, not a new one")
		require.Equal(t, lastEventID.String(), e.MessageID, "the stored messageId")
		require.True(t, lastEventAt.Equal(e.Envelope.OccurredAt), "occurredAt is the last transition's moment")
		require.Len(t, e.Envelope.Payload.Targets, 2)
	}

	_, again := b.run(t, app.SnapshotFilter{})
	require.Len(t, again, 3)
	for i, e := range again {
		require.Equal(t, events[i].MessageID, e.MessageID, "a second run redelivers the same ids")
		require.Equal(t, string(events[i].Raw), string(e.Raw))
	}
}

// TestSnapshotSkipsAPurchaseWhoseMessageIDIsUnknown: a purchase whose row
// keeps no last event (its event left the outbox before migration 00008)
// gets no record by default: no consumer saw a derived id, and one deduping
// by messageId alone would count it again. It is counted and reported, and
// the rest of its batch is written. With SendDerivedIDs it goes under a
// UUIDv5 of (purchase id, version) at its updated_at, the same on every run,
// and is reported as sent.
func TestSnapshotSkipsAPurchaseWhoseMessageIDIsUnknown(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	known := promotiontest.InsertPurchases(t, b.db, b.project, 3, promotiontest.Purchases{})
	unknown := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 2, promotiontest.Purchases{UnknownLastEvent: true}))
	ctx := context.Background()
	run := func(derived bool) (app.SnapshotProgress, *reportedUnknown) {
		obs := &reportedUnknown{}
		res, err := app.NewSnapshotHandler(b.store, nil).Handle(ctx,
			app.SnapshotCommand{Rate: 100000, BatchSize: 2, SendDerivedIDs: derived}, obs)
		require.NoError(t, err)
		require.True(t, res.Complete)
		return res, obs
	}

	res, obs := run(false)
	require.Equal(t, 3, res.Events)
	require.Equal(t, 2, res.SkippedUnknownID)
	require.Zero(t, res.SentDerivedID)
	require.Equal(t, sortedIDs(known), purchaseIDsOf(b.snapshotEvents(t, res.SnapshotID)), "the known ones only")
	require.Len(t, obs.unknown, 2)
	for i, u := range obs.unknown {
		require.Equal(t, app.UnknownIDSnapshot{Action: app.UnknownIDSkipped, PurchaseID: unknown[i],
			TenantID: u.TenantID, Status: "Active", Version: 1}, u)
		require.NotEqual(t, uuid.Nil, u.TenantID)
	}

	var sent []promotiontest.OutboxEvent
	for range 2 {
		res, obs = run(true)
		require.Equal(t, 5, res.Events)
		require.Zero(t, res.SkippedUnknownID)
		require.Equal(t, 2, res.SentDerivedID)
		events := b.snapshotEvents(t, res.SnapshotID)
		require.Len(t, obs.unknown, 2)
		var derived []promotiontest.OutboxEvent
		for i, u := range obs.unknown {
			require.Equal(t, app.UnknownIDSent, u.Action)
			require.Equal(t, unknown[i], u.PurchaseID)
			require.Equal(t, adapters.LegacyEventID(u.PurchaseID, 1), u.DerivedID)
			for _, e := range events {
				if e.Envelope.AggregateID == u.PurchaseID {
					require.Equal(t, u.DerivedID.String(), e.MessageID)
					derived = append(derived, e)
				}
			}
		}
		require.Len(t, derived, 2)
		if sent != nil {
			for i := range derived {
				require.Equal(t, string(sent[i].Raw), string(derived[i].Raw), "the same derived record on every run")
			}
		}
		sent = derived
	}
}

// reportedUnknown records the purchases a run reported with an unknown
// messageId.
type reportedUnknown struct {
	ignoreSnapshotReports
	unknown []app.UnknownIDSnapshot
}

func (r *reportedUnknown) UnknownID(u app.UnknownIDSnapshot) { r.unknown = append(r.unknown, u) }

// TestSnapshotRedeliversTheLastPublishedEvent: for a purchase bought, one
// cancelled and one expired through the repositories, a snapshot's record
// is the last event each published, byte for byte: messageId, occurredAt,
// version and payload; only event_origin and correlation_id differ. Three
// snapshots add no message id.
func TestSnapshotRedeliversTheLastPublishedEvent(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	ctx := context.Background()
	active, cancelled, expired := b.buy(t, b.project), b.buy(t, b.project), b.buy(t, b.project)
	require.NoError(t, b.cancel(ctx, cancelled, nil))
	promotiontest.MakeDue(t, b.db, time.Hour, expired)
	repo, err := adapters.NewExpireRepository(b.db.Gorm, promotiontest.Publisher(t, nil))
	require.NoError(t, err)
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	done, err := promotiontest.ExpireBatches(t, repo).ExpireBatch(ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10,
		Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})
	require.NoError(t, err)
	require.Len(t, done.Expired, 1)

	last := map[uuid.UUID]promotiontest.OutboxEvent{}
	transitions := promotiontest.OutboxEvents(t, b.db)
	for _, e := range transitions {
		last[e.Envelope.AggregateID] = e
	}
	require.Len(t, transitions, 5, "three Active events, a Cancelled and an Expired one")
	for range 3 {
		res, events := b.run(t, app.SnapshotFilter{IncludeEnded: true})
		require.Equal(t, 3, res.Events)
		for _, e := range events {
			want := last[e.Envelope.AggregateID]
			require.Equal(t, want.MessageID, e.MessageID)
			require.Equal(t, string(want.Raw), string(e.Raw), "the event itself, byte for byte")
			require.Equal(t, contract.EventOriginSnapshot, e.Metadata[kafka.MetaEventOrigin])
			require.Equal(t, res.SnapshotID.String(), e.Metadata[kafka.MetaCorrelationID])
			want.Metadata[kafka.MetaEventOrigin] = e.Metadata[kafka.MetaEventOrigin]
			want.Metadata[kafka.MetaCorrelationID] = e.Metadata[kafka.MetaCorrelationID]
			require.Equal(t, want.Metadata, e.Metadata, "the other headers too")
		}
	}
	require.Equal(t, map[contract.Status]bool{contract.StatusActive: true, contract.StatusCancelled: true, contract.StatusExpired: true},
		map[contract.Status]bool{last[active].Envelope.Payload.Status: true, last[cancelled].Envelope.Payload.Status: true,
			last[expired].Envelope.Payload.Status: true})
	ids := map[string]bool{}
	for _, e := range promotiontest.OutboxEvents(t, b.db) {
		ids[e.MessageID] = true
	}
	require.Len(t, ids, 5, "three snapshots, fourteen rows, the five message ids of the transitions")
}

// TestSnapshotFilters: tenant, purchases, target kind and ended purchases
// select what each flag of the command says.
func TestSnapshotFilters(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	projects := promotiontest.InsertPurchases(t, b.db, b.project, 4, promotiontest.Purchases{})
	posts := promotiontest.InsertPurchases(t, b.db, b.post, 2, promotiontest.Purchases{})
	cancelled := promotiontest.InsertPurchases(t, b.db, b.project, 2, promotiontest.Purchases{Status: domain.StatusCancelled})
	expired := promotiontest.InsertPurchases(t, b.db, b.post, 1, promotiontest.Purchases{Status: domain.StatusExpired})
	tenant := uuid.New()
	b.setTenant(t, tenant, projects[0], posts[1], cancelled[0])

	for _, tt := range []struct {
		name   string
		filter app.SnapshotFilter
		want   []uuid.UUID
	}{
		{"every Active one", app.SnapshotFilter{}, sortedIDs(projects, posts)},
		{"a tenant's Active ones", app.SnapshotFilter{TenantID: tenant}, sortedIDs([]uuid.UUID{projects[0], posts[1]})},
		{"a tenant's, ended included", app.SnapshotFilter{TenantID: tenant, IncludeEnded: true},
			sortedIDs([]uuid.UUID{projects[0], posts[1], cancelled[0]})},
		{"named purchases, an ended one left out", app.SnapshotFilter{PurchaseIDs: []uuid.UUID{projects[2], posts[0], expired[0]}},
			sortedIDs([]uuid.UUID{projects[2], posts[0]})},
		{"named purchases, ended included", app.SnapshotFilter{PurchaseIDs: []uuid.UUID{projects[2], expired[0]}, IncludeEnded: true},
			sortedIDs([]uuid.UUID{projects[2], expired[0]})},
		{"a target kind", app.SnapshotFilter{TargetKind: domain.TargetKindPost}, sortedIDs(posts)},
		{"a target kind, ended included", app.SnapshotFilter{TargetKind: domain.TargetKindPost, IncludeEnded: true}, sortedIDs(posts, expired)},
		{"every purchase", app.SnapshotFilter{IncludeEnded: true}, sortedIDs(projects, posts, cancelled, expired)},
		{"nothing matches", app.SnapshotFilter{TenantID: uuid.New()}, []uuid.UUID{}},
	} {
		res, events := b.run(t, tt.filter)
		require.Equal(t, len(tt.want), res.Events, tt.name)
		require.Equal(t, tt.want, purchaseIDsOf(events), tt.name)
	}
}

// TestSnapshotBatchesWalkTheKeysetOnce: batches of 100 over 250 purchases
// take each once, in id order; a run stopped after two batches resumes by
// its id alone from its stored position, and the short batch completes it.
func TestSnapshotBatchesWalkTheKeysetOnce(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	ids := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 250, promotiontest.Purchases{}))
	snapshot := b.start(t, app.SnapshotFilter{})
	ctx := context.Background()
	var after uuid.UUID
	for range 2 {
		res, err := b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: snapshot, After: after, Limit: 100})
		require.NoError(t, err)
		require.Equal(t, 100, res.Read)
		require.Equal(t, res.Read, res.Events)
		after = res.Last
	}
	stored, err := b.store.Snapshot(ctx, snapshot)
	require.NoError(t, err)
	require.Equal(t, app.SnapshotRun{ID: snapshot, After: ids[199], Events: 200}, stored)

	res, err := app.NewSnapshotHandler(b.store, nil).Handle(ctx,
		app.SnapshotCommand{SnapshotID: snapshot, Rate: 100000, BatchSize: 100}, ignoreSnapshotReports{})
	require.NoError(t, err)
	require.Equal(t, 50, res.Events)
	require.Equal(t, 250, res.TotalEvents)
	require.True(t, res.Complete)
	require.Equal(t, ids, purchaseIDsOf(b.snapshotEvents(t, snapshot)), "every purchase once, in id order")
	stored, err = b.store.Snapshot(ctx, snapshot)
	require.NoError(t, err)
	require.Equal(t, app.SnapshotRun{ID: snapshot, After: ids[249], Events: 250, Complete: true}, stored)
}

// A batch whose snapshot stands elsewhere (another process moved it on), is
// complete, or is unknown writes nothing; a stored filter reads back whole.
func TestSnapshotBatchRefusesAPositionNotItsOwn(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	ids := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 3, promotiontest.Purchases{}))
	ctx := context.Background()
	filter := app.SnapshotFilter{TenantID: uuid.New(), PurchaseIDs: ids, TargetKind: domain.TargetKindPost, IncludeEnded: true}
	snapshot := b.start(t, filter)
	stored, err := b.store.Snapshot(ctx, snapshot)
	require.NoError(t, err)
	require.Equal(t, app.SnapshotRun{ID: snapshot, Filter: filter}, stored)

	plain := b.start(t, app.SnapshotFilter{})
	_, err = b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: plain, After: ids[0], Limit: 10})
	require.ErrorIs(t, err, app.ErrSnapshotMovedOn)
	_, err = b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: plain, Limit: 10})
	require.NoError(t, err)
	_, err = b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: plain, After: ids[2], Limit: 10})
	require.ErrorIs(t, err, app.ErrSnapshotMovedOn, "complete")
	_, err = b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: uuid.New(), Limit: 10})
	require.ErrorIs(t, err, app.ErrSnapshotNotFound)
	_, err = b.store.Snapshot(ctx, uuid.New())
	require.ErrorIs(t, err, app.ErrSnapshotNotFound)
	require.Len(t, b.snapshotEvents(t, plain), 3, "the one batch that stood where the snapshot stood")
}

// TestSnapshotLeavesOutAPoisonPurchase: a purchase without targets has no
// event; it is reported and the rest of its batch is written.
func TestSnapshotLeavesOutAPoisonPurchase(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	ids := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 5, promotiontest.Purchases{}))
	_, err := b.db.SQL.Exec(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = $1`, ids[2])
	require.NoError(t, err)
	res, err := b.store.SnapshotBatch(context.Background(), app.SnapshotBatch{SnapshotID: b.start(t, app.SnapshotFilter{}), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 5, res.Read)
	require.Equal(t, 4, res.Events)
	require.Len(t, res.Failed, 1)
	require.Equal(t, ids[2], res.Failed[0].PurchaseID)
	require.ErrorContains(t, res.Failed[0].Err, "target")
}

// TestCancelWaitsForTheSnapshotBatchThatHoldsItsPurchase: a batch that has
// locked purchase A waits for purchase B, which another transaction holds.
// A cancel of A waits for the batch (it does not slip in between the read
// and the write of A's snapshot event), and its Cancelled event comes after
// the snapshot's event of A's older state.
func TestCancelWaitsForTheSnapshotBatchThatHoldsItsPurchase(t *testing.T) {
	t.Parallel()
	b := newSnapshotBundle(t)
	ids := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 2, promotiontest.Purchases{}))
	a, held := ids[0], ids[1]
	ctx := context.Background()

	holder, err := b.db.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.Exec(`SELECT 1 FROM promotion.promotion_purchases WHERE id = $1 FOR UPDATE`, held)
	require.NoError(t, err)

	snapshot := b.start(t, app.SnapshotFilter{})
	batchDone := make(chan error, 1)
	go func() {
		_, err := b.store.SnapshotBatch(ctx, app.SnapshotBatch{SnapshotID: snapshot, Limit: 10})
		batchDone <- err
	}()
	b.db.WaitForLockWaiters(t, 1) // the batch holds A and waits for B
	cancelDone := make(chan error, 1)
	go func() { cancelDone <- b.cancel(ctx, a, nil) }()
	b.db.WaitForLockWaiters(t, 2) // the cancel waits for the batch
	require.NoError(t, holder.Rollback())
	require.NoError(t, <-batchDone)
	require.NoError(t, <-cancelDone)

	var versions []string
	for _, e := range promotiontest.OutboxEvents(t, b.db) {
		if e.Envelope.AggregateID == a {
			versions = append(versions, fmt.Sprintf("%s %d %s", e.Envelope.Payload.Status, e.Envelope.Payload.Version, e.Metadata[kafka.MetaEventOrigin]))
		}
	}
	require.Equal(t, []string{"Active 1 snapshot", "Cancelled 2 "}, versions,
		"the snapshot's event of the older state comes before the cancel's")
}

// TestSnapshotBatchWaitsForACancelAndReadsItsResult: a batch that meets a
// purchase a cancel holds waits for the cancel to commit and then reads the
// cancelled state: by default it leaves the purchase out, and with ended
// purchases included it writes the Cancelled state after the cancel's event.
func TestSnapshotBatchWaitsForACancelAndReadsItsResult(t *testing.T) {
	t.Parallel()
	for _, includeEnded := range []bool{false, true} {
		t.Run(fmt.Sprintf("include ended %t", includeEnded), func(t *testing.T) {
			t.Parallel()
			b := newSnapshotBundle(t)
			ids := sortedIDs(promotiontest.InsertPurchases(t, b.db, b.project, 3, promotiontest.Purchases{}))
			ctx := context.Background()
			locked, release := make(chan struct{}), make(chan struct{})
			cancelDone := make(chan error, 1)
			go func() {
				cancelDone <- b.cancel(ctx, ids[1], func() { close(locked); <-release })
			}()
			<-locked
			snapshot := b.start(t, app.SnapshotFilter{IncludeEnded: includeEnded})
			batchDone := make(chan error, 1)
			go func() {
				_, err := b.store.SnapshotBatch(ctx, app.SnapshotBatch{
					SnapshotID: snapshot, Limit: 10, Filter: app.SnapshotFilter{IncludeEnded: includeEnded}})
				batchDone <- err
			}()
			b.db.WaitForLockWaiters(t, 1) // the batch waits for the cancel
			close(release)
			require.NoError(t, <-cancelDone)
			require.NoError(t, <-batchDone)

			var got []string
			for _, e := range promotiontest.OutboxEvents(t, b.db) {
				if e.Envelope.AggregateID == ids[1] {
					got = append(got, fmt.Sprintf("%s %d %s", e.Envelope.Payload.Status, e.Envelope.Payload.Version, e.Metadata[kafka.MetaEventOrigin]))
				}
			}
			want := []string{"Cancelled 2 "}
			if includeEnded {
				want = append(want, "Cancelled 2 snapshot")
			}
			require.Equal(t, want, got)
			require.Len(t, b.snapshotEvents(t, snapshot), len(want)+1, "the other two, and the cancelled one only when ended ones are included")
		})
	}
}

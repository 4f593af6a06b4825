package app_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// keysetStore serves a snapshot from a sorted list of purchase ids, as the
// database's keyset order would. It stands in for the database only in
// these tests of the run's own logic (pacing, stop, resume); the adapters'
// tests run batches against PostgreSQL.
type keysetStore struct {
	ids    []uuid.UUID
	poison map[uuid.UUID]bool
	// unknown are the purchases whose last messageId is unknown.
	unknown map[uuid.UUID]bool
	runs    map[uuid.UUID]app.SnapshotRun
	batches []app.SnapshotBatch
	starts  []time.Duration // when each batch started, since the run began
	began   time.Time
	// during runs inside a batch, with its number and context.
	during func(n int, ctx context.Context)
}

func newKeysetStore(n int) *keysetStore {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return &keysetStore{ids: ids, poison: map[uuid.UUID]bool{}, unknown: map[uuid.UUID]bool{}, runs: map[uuid.UUID]app.SnapshotRun{}, began: time.Now()}
}

func (s *keysetStore) StartSnapshot(_ context.Context, run app.SnapshotRun) error {
	s.runs[run.ID] = run
	return nil
}

func (s *keysetStore) Snapshot(_ context.Context, id uuid.UUID) (app.SnapshotRun, error) {
	run, ok := s.runs[id]
	if !ok {
		return app.SnapshotRun{}, app.ErrSnapshotNotFound
	}
	return run, nil
}

// SnapshotBatch serves the batch and moves the stored run, as the
// database's transaction does; a run not where b says is refused.
func (s *keysetStore) SnapshotBatch(ctx context.Context, b app.SnapshotBatch) (app.SnapshotBatchResult, error) {
	s.batches = append(s.batches, b)
	s.starts = append(s.starts, time.Since(s.began))
	if s.during != nil {
		s.during(len(s.batches), ctx)
	}
	run := s.runs[b.SnapshotID]
	if run.After != b.After || run.Complete {
		return app.SnapshotBatchResult{}, app.ErrSnapshotMovedOn
	}
	var res app.SnapshotBatchResult
	for _, id := range s.ids {
		if bytes.Compare(id[:], b.After[:]) <= 0 {
			continue
		}
		if res.Read == b.Limit {
			break
		}
		res.Read++
		res.Last = id
		if s.poison[id] {
			res.Failed = append(res.Failed, app.FailedSnapshot{PurchaseID: id, Err: errors.New("purchase has no targets")})
			continue
		}
		if s.unknown[id] {
			u := app.UnknownIDSnapshot{Action: app.UnknownIDSkipped, PurchaseID: id}
			if b.SendDerivedIDs {
				u.Action = app.UnknownIDSent
			}
			res.Unknown = append(res.Unknown, u)
			if !b.SendDerivedIDs {
				continue
			}
		}
		res.Events++
	}
	if res.Read > 0 {
		run.After = res.Last
	}
	run.Events += res.Events
	run.Complete = res.Read < b.Limit
	s.runs[b.SnapshotID] = run
	return res, nil
}

// observed records what a run reported.
type observed struct {
	started  []app.SnapshotProgress
	progress []app.SnapshotProgress
	failed   []uuid.UUID
	unknown  []app.UnknownIDSnapshot
}

func (o *observed) Started(p app.SnapshotProgress)    { o.started = append(o.started, p) }
func (o *observed) Progress(p app.SnapshotProgress)   { o.progress = append(o.progress, p) }
func (o *observed) Failed(f app.FailedSnapshot)       { o.failed = append(o.failed, f.PurchaseID) }
func (o *observed) UnknownID(u app.UnknownIDSnapshot) { o.unknown = append(o.unknown, u) }

func TestSnapshotPacesBatchesToTheRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(1000)
		obs := &observed{}
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
			app.SnapshotCommand{Rate: 500, BatchSize: 100}, obs)
		require.NoError(t, err)
		require.True(t, res.Complete)
		require.Equal(t, 1000, res.Events)
		require.Equal(t, store.ids[999], res.After)
		// Ten full batches of 100, 200 ms apart at 500/s, then the short one
		// that finds the end.
		require.Len(t, store.starts, 11)
		for i, start := range store.starts {
			require.Equal(t, time.Duration(i)*200*time.Millisecond, start, "batch %d", i)
		}
		require.Len(t, obs.progress, 1, "a progress line about once a second")
		require.Equal(t, 600, obs.progress[0].Events)
		require.Equal(t, store.ids[599], obs.progress[0].After)
		require.Equal(t, store.batches[0].SnapshotID, res.SnapshotID)
		for _, b := range store.batches {
			require.Equal(t, res.SnapshotID, b.SnapshotID, "one id for the whole run")
		}
	})
}

func TestSnapshotBatchNeverHoldsMoreThanASecondOfTheRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(25)
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
			app.SnapshotCommand{Rate: 10, BatchSize: 100}, &observed{})
		require.NoError(t, err)
		require.Equal(t, 25, res.Events)
		require.Len(t, store.batches, 3)
		for _, b := range store.batches {
			require.Equal(t, 10, b.Limit)
		}
		require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, store.starts)
	})
}

// TestSnapshotStopsAfterTheBatchInFlight cancels the run while its third
// batch runs: that batch runs on, uncancelled, to its end; no fourth starts,
// and the result says where to resume.
func TestSnapshotStopsAfterTheBatchInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(1000)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var inFlight error
		store.during = func(n int, batchCtx context.Context) {
			if n == 3 {
				cancel()
				inFlight = batchCtx.Err()
			}
		}
		res, err := app.NewSnapshotHandler(store, nil).Handle(ctx, app.SnapshotCommand{Rate: 1000, BatchSize: 100}, &observed{})
		require.ErrorIs(t, err, app.ErrSnapshotStopped)
		require.NoError(t, inFlight, "the batch in flight is not cancelled")
		require.Len(t, store.batches, 3)
		require.False(t, res.Complete)
		require.Equal(t, 300, res.Events)
		require.Equal(t, store.ids[299], res.After)
	})
}

// TestSnapshotResumesWhereItsStoredRunStands resumes a stored run by its id
// alone: its own filter, from its stored position (not an --after given
// with it), every purchase after it once, and the snapshot's total.
func TestSnapshotResumesWhereItsStoredRunStands(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(1000)
		id := uuid.New()
		filter := app.SnapshotFilter{IncludeEnded: true, TargetKind: "Post"}
		store.runs[id] = app.SnapshotRun{ID: id, Filter: filter, After: store.ids[449], Events: 450}
		obs := &observed{}
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
			app.SnapshotCommand{SnapshotID: id, After: store.ids[10], Rate: 1000, BatchSize: 100}, obs)
		require.NoError(t, err)
		require.Equal(t, id, res.SnapshotID)
		require.Equal(t, 550, res.Events)
		require.Equal(t, 1000, res.TotalEvents)
		require.True(t, res.Complete)
		require.Equal(t, store.ids[449], store.batches[0].After)
		require.Equal(t, store.ids[549], store.batches[1].After)
		require.Equal(t, filter, store.batches[0].Filter, "the stored filter")
		require.Len(t, obs.started, 1)
		require.Equal(t, store.ids[449], obs.started[0].After)
	})
}

// A new run is stored before its first batch, so it is resumable from then
// on; Started says so once.
func TestSnapshotIsStoredBeforeItsFirstBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(5)
		obs := &observed{}
		filter := app.SnapshotFilter{TenantID: uuid.New()}
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
			app.SnapshotCommand{Filter: filter, Rate: 1000, BatchSize: 100}, obs)
		require.NoError(t, err)
		require.Equal(t, []app.SnapshotProgress{{SnapshotID: res.SnapshotID}}, obs.started)
		require.Equal(t, app.SnapshotRun{ID: res.SnapshotID, Filter: filter, After: store.ids[4], Events: 5, Complete: true},
			store.runs[res.SnapshotID])
	})
}

func TestSnapshotResumeRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(10)
		id, done := uuid.New(), uuid.New()
		store.runs[id] = app.SnapshotRun{ID: id, Filter: app.SnapshotFilter{TenantID: uuid.New()}}
		store.runs[done] = app.SnapshotRun{ID: done, After: store.ids[9], Events: 10, Complete: true}
		h := app.NewSnapshotHandler(store, nil)

		_, err := h.Handle(context.Background(), app.SnapshotCommand{SnapshotID: uuid.New(), Rate: 10, BatchSize: 10}, &observed{})
		require.ErrorIs(t, err, app.ErrSnapshotNotFound)
		_, err = h.Handle(context.Background(), app.SnapshotCommand{SnapshotID: id, Rate: 10, BatchSize: 10,
			Filter: app.SnapshotFilter{IncludeEnded: true}}, &observed{})
		require.ErrorIs(t, err, app.ErrInvalidSnapshot, "a filter other than the stored one")
		require.Empty(t, store.batches)

		res, err := h.Handle(context.Background(), app.SnapshotCommand{SnapshotID: done, Rate: 10, BatchSize: 10}, &observed{})
		require.NoError(t, err)
		require.Equal(t, app.SnapshotProgress{SnapshotID: done, TotalEvents: 10, After: store.ids[9], Complete: true}, res)
		require.Empty(t, store.batches, "a complete snapshot writes nothing more")
	})
}

// Two processes resuming one snapshot: the batch of the one whose position
// the other moved is refused, and the run stops there.
func TestSnapshotStopsWhenAnotherProcessMovedItOn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(300)
		id := uuid.New()
		store.runs[id] = app.SnapshotRun{ID: id}
		store.during = func(n int, _ context.Context) {
			if n == 2 {
				run := store.runs[id]
				run.After = store.ids[199] // the other process's batch
				store.runs[id] = run
			}
		}
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
			app.SnapshotCommand{SnapshotID: id, Rate: 1000, BatchSize: 100}, &observed{})
		require.ErrorIs(t, err, app.ErrSnapshotMovedOn)
		require.False(t, res.Complete)
		require.Equal(t, 100, res.Events, "the first batch only")
		require.Len(t, store.batches, 2)
	})
}

func TestSnapshotCountsAndReportsPurchasesLeftOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newKeysetStore(250)
		store.poison[store.ids[3]], store.poison[store.ids[180]] = true, true
		obs := &observed{}
		res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(), app.SnapshotCommand{Rate: 1000, BatchSize: 100}, obs)
		require.NoError(t, err)
		require.Equal(t, 248, res.Events)
		require.Equal(t, 2, res.Failed)
		require.Equal(t, []uuid.UUID{store.ids[3], store.ids[180]}, obs.failed)
		require.True(t, res.Complete)
	})
}

// TestSnapshotCountsAndReportsPurchasesWithAnUnknownMessageID: the run
// passes SendDerivedIDs to every batch, counts the purchases skipped (or
// sent under a derived id) apart from the failed ones, and reports each.
func TestSnapshotCountsAndReportsPurchasesWithAnUnknownMessageID(t *testing.T) {
	t.Parallel()
	for _, derived := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			store := newKeysetStore(250)
			store.unknown[store.ids[7]], store.unknown[store.ids[120]], store.unknown[store.ids[249]] = true, true, true
			store.poison[store.ids[3]] = true
			obs := &observed{}
			res, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(),
				app.SnapshotCommand{Rate: 1000, BatchSize: 100, SendDerivedIDs: derived}, obs)
			require.NoError(t, err)
			require.True(t, res.Complete)
			require.Equal(t, 1, res.Failed)
			for _, b := range store.batches {
				require.Equal(t, derived, b.SendDerivedIDs)
			}
			var reported []uuid.UUID
			for _, u := range obs.unknown {
				reported = append(reported, u.PurchaseID)
				require.Equal(t, derived, u.Sent())
			}
			require.Equal(t, []uuid.UUID{store.ids[7], store.ids[120], store.ids[249]}, reported)
			if derived {
				require.Equal(t, 249, res.Events)
				require.Equal(t, 3, res.SentDerivedID)
				require.Zero(t, res.SkippedUnknownID)
			} else {
				require.Equal(t, 246, res.Events)
				require.Equal(t, 3, res.SkippedUnknownID)
				require.Zero(t, res.SentDerivedID)
			}
		})
	}
}

func TestSnapshotRefusesBadOptionsBeforeAnyBatch(t *testing.T) {
	t.Parallel()
	for name, cmd := range map[string]app.SnapshotCommand{
		"rate 0":              {Rate: 0, BatchSize: 100},
		"negative rate":       {Rate: -5, BatchSize: 100},
		"batch size 0":        {Rate: 10, BatchSize: 0},
		"batch size too big":  {Rate: 10, BatchSize: app.MaxSnapshotBatchSize + 1},
		"unknown target kind": {Rate: 10, BatchSize: 100, Filter: app.SnapshotFilter{TargetKind: "Billboard"}},
		"nil purchase":        {Rate: 10, BatchSize: 100, Filter: app.SnapshotFilter{PurchaseIDs: []uuid.UUID{uuid.Nil}}},
		"after without id":    {Rate: 10, BatchSize: 100, After: uuid.New()},
	} {
		store := newKeysetStore(3)
		_, err := app.NewSnapshotHandler(store, nil).Handle(context.Background(), cmd, &observed{})
		require.ErrorIs(t, err, app.ErrInvalidSnapshot, name)
		require.Empty(t, store.batches, "%s: nothing read, nothing written", name)
		require.Empty(t, store.runs, "%s: no snapshot stored", name)
	}
}

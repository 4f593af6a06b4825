package adapters

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// unwrittenChanges names the columns of purchaseModel that differ between
// before and after but that transitionColumns does not hold.
func unwrittenChanges(tb testing.TB, before, after purchaseModel) []string {
	tb.Helper()
	written := make(map[string]bool, len(transitionColumns))
	for _, c := range transitionColumns {
		written[c.name] = true
	}
	var missing []string
	for _, name := range changedColumnNames(tb, before, after) {
		if !written[name] {
			missing = append(missing, name)
		}
	}
	return missing
}

// changedColumnNames names the columns of purchaseModel that differ between
// before and after, in the model's order.
func changedColumnNames(tb testing.TB, before, after purchaseModel) []string {
	tb.Helper()
	s, err := schema.Parse(&purchaseModel{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(tb, err)
	b, a := reflect.ValueOf(before), reflect.ValueOf(after)
	var changed []string
	for _, f := range s.Fields {
		if f.DBName == "" {
			continue
		}
		i := f.StructField.Index
		if !reflect.DeepEqual(b.FieldByIndex(i).Interface(), a.FieldByIndex(i).Interface()) {
			changed = append(changed, f.DBName)
		}
	}
	return changed
}

// setColumns are the transition columns args sets (set_<column> true).
func setColumns(args pgx.NamedArgs) []string {
	var names []string
	for _, c := range transitionColumns {
		if args["set_"+c.name] == true {
			names = append(names, c.name)
		}
	}
	return names
}

// eventColumns keep the transition's event; every transition writes them.
var eventColumns = []string{"last_event_id", "last_event_at"}

// Every column a transition changes is one transitionWrite writes: a field
// that Expire or Cancel starts to change without a column here fails this
// test, rather than being lost by the batch (one write path for a transition).
// Written with the row it was loaded from, a transition sets exactly the
// columns it changed; without it, every transition column.
func TestTransitionsChangeOnlyWrittenColumns(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for name, transit := range map[string]func(*domain.Purchase) error{
		"expire": func(p *domain.Purchase) error { return p.Expire(at) },
		"cancel": func(p *domain.Purchase) error { return p.Cancel("refund", uuid.New(), at) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := promotiontest.ActivePurchase(t, at.Add(-time.Minute))
			before, _ := toDBPurchase(p)
			require.NoError(t, transit(p))
			after, _ := toDBPurchase(p)
			require.NotEqual(t, before, after)
			require.Empty(t, unwrittenChanges(t, before, after))

			args := transitionArgs([]transition{{purchase: p, previousVersion: before.Version, loaded: &before}})
			require.Equal(t, changedColumnNames(t, before, after), setColumns(args))
			for _, c := range transitionColumns {
				require.Equal(t, slices.Contains(setColumns(args), c.name), args[c.name] != nil, "%s is sent only when set", c.name)
			}
			args = transitionArgs([]transition{{purchase: p, previousVersion: before.Version}})
			all := make([]string, len(transitionColumns))
			for i, c := range transitionColumns {
				all[i] = c.name
			}
			require.Equal(t, all, setColumns(args))
		})
	}
}

// The check above can fail: a changed column that is not written is named.
func TestUnwrittenChangesNamesAColumnLeftOut(t *testing.T) {
	t.Parallel()
	before, _ := toDBPurchase(promotiontest.ActivePurchase(t, time.Now()))
	after := before
	after.PackageCode, after.Status = "other", "Expired"
	require.Equal(t, []string{"package_code"}, unwrittenChanges(t, before, after))
}

// A column one row of a batch changes is set for the whole batch.
func TestTransitionWriteSetsAColumnAnyRowChanged(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	expired, cancelled := promotiontest.ActivePurchase(t, at.Add(-time.Minute)), promotiontest.ActivePurchase(t, at.Add(-time.Minute))
	loadedExpired, _ := toDBPurchase(expired)
	loadedCancelled, _ := toDBPurchase(cancelled)
	require.NoError(t, expired.Expire(at))
	require.NoError(t, cancelled.Cancel("refund", uuid.New(), at))
	args := transitionArgs([]transition{
		{purchase: expired, previousVersion: loadedExpired.Version, loaded: &loadedExpired},
		{purchase: cancelled, previousVersion: loadedCancelled.Version, loaded: &loadedCancelled},
	})
	require.Contains(t, setColumns(args), "cancel_reason")
}

// The transition statement writes exactly transitionColumns, each under
// its set_ flag, and the event's two columns always.
func TestTransitionStatementWritesTransitionColumns(t *testing.T) {
	t.Parallel()
	set := regexp.MustCompile(`(?m)^\t\t(\w+) = (.*?),?$`).FindAllStringSubmatch(strings.Split(transitionQuery, "\n\tFROM")[0], -1)
	var names []string
	for _, m := range set {
		names = append(names, m[1])
		if !slices.Contains(eventColumns, m[1]) {
			require.Equal(t, fmt.Sprintf("CASE WHEN @set_%[1]s::boolean THEN v.%[1]s ELSE p.%[1]s END", m[1]), m[2])
		}
	}
	want := make([]string, 0, len(transitionColumns)+len(eventColumns))
	for _, c := range transitionColumns {
		want = append(want, c.name)
	}
	require.Equal(t, append(want, eventColumns...), names)
}

// Every transition column is a column of the model, so the statement built
// from the list is valid SQL for the table.
func TestTransitionColumnsAreModelColumns(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(&purchaseModel{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	for _, c := range transitionColumns {
		require.True(t, slices.Contains(s.DBNames, c.name), c.name)
	}
}

// The expiry batch stores exactly the domain's state after Expire: the row
// read back equals the model of the purchase Expire returned, column by
// column (the acting user, set before, is cleared).
func TestExpireBatchStoresTheDomainsState(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	id := b.insertDue(t, 1)[0]
	b.exec(t, fmt.Sprintf(`UPDATE promotion.promotion_purchases SET updated_by_user_id = '%s' WHERE id = '%s'`, uuid.New(), id))
	var stored purchaseModel
	require.NoError(t, b.db.Gorm.Where("id = ?", id).Take(&stored).Error)
	targets, err := loadTargets(b.db.Gorm, []uuid.UUID{id})
	require.NoError(t, err)
	want, err := toDomainPurchase(stored, targets[id])
	require.NoError(t, err)
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	require.NoError(t, want.Expire(asOf))

	res, err := b.batches.ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10,
		Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})
	require.NoError(t, err)
	require.Len(t, res.Expired, 1)

	var got purchaseModel
	require.NoError(t, b.db.Gorm.Where("id = ?", id).Take(&got).Error)
	wantRow, _ := toDBPurchase(want)
	require.False(t, wantRow.UpdatedByUserID.Valid)
	normalize := func(m *purchaseModel) {
		for _, t := range []*time.Time{&m.StartsAt, &m.EndsAt, &m.CreatedAt, &m.UpdatedAt} {
			*t = t.UTC()
		}
	}
	normalize(&got)
	normalize(&wantRow)
	require.True(t, wantRow.PriceAmount.Equal(got.PriceAmount))
	got.PriceAmount = wantRow.PriceAmount
	require.Equal(t, wantRow, got)
}

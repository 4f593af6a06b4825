package adapters

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"
)

// insert sends purchaseValues under purchaseColumns: each value must
// be the model's field of that column, which GORM's own reading of the
// model's tags says.
func TestPurchaseValuesFollowPurchaseColumns(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(&purchaseModel{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	reason := "reason"
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Every field distinct, so a swap of two columns shows.
	m := purchaseModel{
		ID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "code", PackageKind: "kind",
		BoostWeight: 7, PriceAmount: decimal.RequireFromString("1.23"), CurrencyID: 643,
		CurrencyIsoCode: "iso", CurrencyName: "name", CurrencySign: "sign", Status: "status",
		PaymentStatus: "payment", StartsAt: at, EndsAt: at.Add(time.Hour), CancelReason: &reason,
		CreatedByUserID: uuid.New(), UpdatedByUserID: uuid.NullUUID{UUID: uuid.New(), Valid: true},
		CreatedAt: at.Add(2 * time.Hour), UpdatedAt: at.Add(3 * time.Hour), Version: 9,
	}
	values := purchaseValues(m)
	require.Len(t, values, len(purchaseColumns))
	for i, col := range purchaseColumns {
		f := s.LookUpField(col)
		require.NotNil(t, f, col)
		require.Equal(t, f.ReflectValueOf(context.Background(), reflect.ValueOf(&m).Elem()).Interface(), values[i], col)
	}
}

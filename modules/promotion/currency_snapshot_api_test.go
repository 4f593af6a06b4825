package promotion_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// TestEndEventsCarryThePurchaseTimeCurrencyAndPrice: the price and the
// currency in an event are "fixed at the moment of publication" of the
// purchase (INV-2): after the currency handbook (promotion.currencies,
// migrations/00002) and the package's price change, a purchase's Cancelled
// and another's Expired event still carry the isoCode, name, sign and price
// their purchase was made at, as their Active events did, while the package
// itself reads the new values.
func TestEndEventsCarryThePurchaseTimeCurrencyAndPrice(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	tenant := uuid.New()
	tok := b.tenantToken(t, tenant)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	cancelled, expired := b.buy(t, tok, pkg.ID, 1), b.buy(t, tok, pkg.ID, 1)
	bought := `{"amount":1500.00,"currencyId":643,"currency":{"isoCode":"RUB","name":"Российский рубль","sign":"₽"}}`

	b.exec(t, `UPDATE promotion.currencies SET iso_code = 'RUR', name = 'Рубль (до 1998 года)', sign = 'р.' WHERE id = 643`)
	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t),
		body: map[string]any{"price": map[string]any{"amount": json.Number("2500.00")}}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res = b.do(t, request{method: http.MethodGet, path: packagesPath, token: tok})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var listed struct {
		Items []packageJSON `json:"items"`
	}
	res.decode(t, &listed)
	require.Len(t, listed.Items, 1)
	require.Equal(t, json.Number("2500.00"), listed.Items[0].Price.Amount)
	require.Equal(t, "RUR", listed.Items[0].Price.Currency.IsoCode, "the package reads the handbook as it is now")
	require.Equal(t, "р.", listed.Items[0].Price.Currency.Sign)

	res = b.do(t, request{method: http.MethodPost, path: cancelPath(cancelled.ID), token: tok, body: map[string]any{"reason": "test"}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	promotiontest.MakeDue(t, b.db, time.Hour, uuid.MustParse(expired.ID))
	done, err := b.module.ExpireOnce(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, done.Expired)

	statuses := map[string][]contract.Status{}
	for _, e := range b.events(t) {
		id := e.Envelope.AggregateID.String()
		statuses[id] = append(statuses[id], e.Envelope.Payload.Status)
		price, err := json.Marshal(e.Envelope.Payload.Price)
		require.NoError(t, err)
		require.JSONEq(t, bought, string(price), "purchase %s, %s event: the purchase-time price and currency",
			id, e.Envelope.Payload.Status)
	}
	require.Equal(t, map[string][]contract.Status{
		cancelled.ID: {contract.StatusActive, contract.StatusCancelled},
		expired.ID:   {contract.StatusActive, contract.StatusExpired},
	}, statuses)
}

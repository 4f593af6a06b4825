package domain

import (
	"github.com/shopspring/decimal"
)

// CurrencyIDRUB is the handbook id of the Russian rouble, the only currency
// a promotion may be priced in (ADR-0048).
const CurrencyIDRUB = 643

// CurrencySnapshot is how a currency looked when a price was fixed; events
// and purchases carry it so that readers need no handbook lookup.
type CurrencySnapshot struct {
	IsoCode string
	Name    string
	Sign    string
}

// RUB is the display snapshot of the Russian rouble.
var RUB = CurrencySnapshot{IsoCode: "RUB", Name: "Российский рубль", Sign: "₽"}

// maxAmount is the first amount that no longer fits numeric(14,2).
var maxAmount = decimal.New(1, 12)

// Price is an amount of money in a currency, as a package lists it and as a
// purchase snapshots it (INV-2). The amount has at most two decimals and is
// never negative (0 is a free package).
type Price struct {
	amount     decimal.Decimal
	currencyID int16
	currency   CurrencySnapshot
}

// NewPrice validates amount and currency. currencyID is an int rather than
// int16 so that an out-of-range id is reported as a rule violation, not
// silently truncated.
func NewPrice(amount decimal.Decimal, currencyID int) (Price, error) {
	var errs fieldErrors
	price := newPrice(amount, currencyID, "", &errs)
	if err := errs.err("invalid price"); err != nil {
		return Price{}, err
	}
	return price, nil
}

func newPrice(amount decimal.Decimal, currencyID int, prefix string, errs *fieldErrors) Price {
	switch {
	case amount.IsNegative():
		errs.add(prefix+"amount", "must be 0 or more")
	case !amount.Equal(amount.Round(2)):
		errs.add(prefix+"amount", "must have at most 2 decimals")
	case amount.GreaterThanOrEqual(maxAmount):
		errs.add(prefix+"amount", "must be less than 1000000000000 (decimal(14,2))")
	}
	if currencyID != CurrencyIDRUB {
		errs.add(prefix+"currencyId", "only RUB (%d) is accepted", CurrencyIDRUB)
	}
	return Price{amount: amount.Round(2), currencyID: CurrencyIDRUB, currency: RUB}
}

// UnmarshalPriceFromDatabase rebuilds a stored price without validation:
// stored rows passed validation (and the table's CHECKs) when written, and a
// snapshot must come back exactly as it was taken.
func UnmarshalPriceFromDatabase(amount decimal.Decimal, currencyID int16, currency CurrencySnapshot) Price {
	return Price{amount: amount, currencyID: currencyID, currency: currency}
}

// Amount returns the amount, rounded to two decimals.
func (p Price) Amount() decimal.Decimal { return p.amount }

// CurrencyID returns the handbook id of the currency.
func (p Price) CurrencyID() int16 { return p.currencyID }

// Currency returns the display snapshot of the currency.
func (p Price) Currency() CurrencySnapshot { return p.currency }

// Equal reports whether both prices are the same amount in the same currency.
func (p Price) Equal(o Price) bool {
	return p.amount.Equal(o.amount) && p.currencyID == o.currencyID && p.currency == o.currency
}

package contract

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// amountPlaces is the scale of decimal(14,2): money in the contract has at
// most two decimals.
const amountPlaces = 2

// maxAmount is the largest value decimal(14,2) holds.
var maxAmount = decimal.RequireFromString("999999999999.99")

// Amount is a sum of money. On the wire it is a JSON number with exactly two
// decimals (1500.00), read and written as decimal text so it never passes
// through binary floating point.
type Amount struct {
	decimal.Decimal
}

// NewAmount wraps d. Its representation is normalised to two decimals when
// that loses nothing, so equal amounts compare equal field by field.
func NewAmount(d decimal.Decimal) Amount {
	return Amount{Decimal: normaliseScale(d)}
}

// ParseAmount reads a decimal string such as "1500.00" or "0.1".
func ParseAmount(s string) (Amount, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return Amount{}, fmt.Errorf("contract.ParseAmount: %q is not a decimal number", s)
	}
	return NewAmount(d), nil
}

// MarshalJSON writes the amount as a JSON number with two decimals. An amount
// with more decimals (which Validate rejects) is written in full rather than
// rounded, so marshalling never changes a value silently.
func (a Amount) MarshalJSON() ([]byte, error) {
	if !hasAtMostTwoDecimals(a.Decimal) {
		return []byte(a.String()), nil
	}
	return []byte(a.StringFixed(amountPlaces)), nil
}

// UnmarshalJSON reads a JSON number from its text, without float64. A JSON
// string is refused: the contract's amount is a number.
func (a *Amount) UnmarshalJSON(data []byte) error {
	if len(data) == 0 || !(data[0] == '-' || (data[0] >= '0' && data[0] <= '9')) {
		return fmt.Errorf("contract: amount: want a JSON number, got %.20q", data)
	}
	d, err := decimal.NewFromString(string(data))
	if err != nil {
		// decimal's error echoes the input unquoted: a consumer stores
		// this error as text, which must not carry NUL or invalid UTF-8.
		return fmt.Errorf("contract: amount: %.40q is not a decimal number", data)
	}
	a.Decimal = normaliseScale(d)
	return nil
}

// hasAtMostTwoDecimals reports whether rounding d to cents would not change
// it.
func hasAtMostTwoDecimals(d decimal.Decimal) bool {
	return d.Round(amountPlaces).Equal(d)
}

// normaliseScale gives d exactly two decimals when that is lossless (1500 and
// 1500.0 become 1500.00) and leaves it alone otherwise.
func normaliseScale(d decimal.Decimal) decimal.Decimal {
	if !hasAtMostTwoDecimals(d) {
		return d
	}
	return d.Round(amountPlaces)
}

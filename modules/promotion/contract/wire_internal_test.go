package contract

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWireMirrorsTheContract keeps the wire form that Marshal writes in step
// with the contract's types: a field added to Envelope or PurchaseChanged
// but not to its mirror would silently never reach the wire.
func TestWireMirrorsTheContract(t *testing.T) {
	t.Parallel()
	require.Equal(t, jsonNames(reflect.TypeFor[Envelope]()), jsonNames(reflect.TypeFor[envelopeOut]()))
	require.Equal(t, jsonNames(reflect.TypeFor[PurchaseChanged]()), jsonNames(reflect.TypeFor[purchaseChangedOut]()))
	require.NotEqual(t, jsonNames(reflect.TypeFor[PurchaseChanged]()), jsonNames(reflect.TypeFor[Target]()),
		"the comparison can fail")
}

// jsonNames lists the json names of t's fields in order.
func jsonNames(t reflect.Type) []string {
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}

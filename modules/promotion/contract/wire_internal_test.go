package contract

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWireMirrorsTheContract keeps the wire form that Marshal writes in step
// with the contract's types: a field added to Envelope or PurchaseChanged
// but not to its mirror (with the same json tag, omitempty included) would
// silently never reach the wire, and one wire() does not copy would go out
// empty.
func TestWireMirrorsTheContract(t *testing.T) {
	t.Parallel()
	const fix = "add it to the wire form in codec.go too (envelopeOut / purchaseChangedOut, same json tag, " +
		"and its copy in wire()): docs/contracts/purchase-changed.md, An additive change, step 1"
	require.Equal(t, jsonTags(reflect.TypeFor[Envelope]()), jsonTags(reflect.TypeFor[envelopeOut]()), fix)
	require.Equal(t, jsonTags(reflect.TypeFor[PurchaseChanged]()), jsonTags(reflect.TypeFor[purchaseChangedOut]()), fix)
	require.NotEqual(t, jsonTags(reflect.TypeFor[PurchaseChanged]()), jsonTags(reflect.TypeFor[Target]()),
		"the comparison can fail")

	// Every field of a type the wire form keeps as it is: set, it arrives.
	var p PurchaseChanged
	pv := reflect.ValueOf(&p).Elem()
	for i := range pv.NumField() {
		switch f := pv.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		}
	}
	out := reflect.ValueOf(p.wire())
	for i := range pv.NumField() {
		if f := pv.Field(i); f.Kind() == reflect.String || f.Kind() == reflect.Int || f.Kind() == reflect.Int64 {
			require.Equal(t, f.Interface(), out.Field(i).Interface(), "wire() does not copy %s: %s", pv.Type().Field(i).Name, fix)
		}
	}
}

// jsonTags lists the json tags of t's fields in order.
func jsonTags(t reflect.Type) []string {
	tags := make([]string, t.NumField())
	for i := range tags {
		tags[i] = t.Field(i).Tag.Get("json")
	}
	return tags
}

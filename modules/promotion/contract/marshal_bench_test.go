package contract_test

import (
	"testing"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// BenchmarkMarshal is the producer's cost of one event (Validate and the
// wire JSON): the expiry job pays it 200 times per batch, the API once per
// purchase (docs/performance.md).
func BenchmarkMarshal(b *testing.B) {
	env := goldenCases(b)[1].envelope // expired
	b.ReportAllocs()
	for b.Loop() {
		if _, err := contract.Marshal(env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the consumer's cost of reading one event.
func BenchmarkDecode(b *testing.B) {
	data, err := contract.Marshal(goldenCases(b)[1].envelope)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := contract.Decode(data, nil); err != nil {
			b.Fatal(err)
		}
	}
}

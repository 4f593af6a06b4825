package contract_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// FuzzDecode: Decode never panics, and an event it accepts that keeps the
// contract's rules survives a Marshal and a second Decode unchanged.
func FuzzDecode(f *testing.F) {
	golden, err := filepath.Glob("testdata/purchase-changed.v1.*.golden.json")
	require.NoError(f, err)
	require.NotEmpty(f, golden)
	for _, name := range golden {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"payload":{"price":{"amount":1e400}}}`))
	quiet := slog.New(slog.DiscardHandler)

	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := contract.Decode(data, quiet)
		if err != nil || e.Validate() != nil {
			return
		}
		again, err := contract.Marshal(e)
		require.NoError(t, err, "a valid event can be written")
		back, err := contract.Decode(again, quiet)
		require.NoError(t, err, "what was written can be read: %s", again)
		require.Equal(t, e, back)
	})
}

package ports

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestMoneyJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"1500": "1500.00", "0": "0.00", "1.5": "1.50", "999999999999.99": "999999999999.99"} {
		b, err := json.Marshal(money{decimal.RequireFromString(in)})
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}

	var m money
	require.NoError(t, json.Unmarshal([]byte(`1500.10`), &m))
	require.Equal(t, "1500.1", m.String())
	require.NoError(t, json.Unmarshal([]byte(`0.1`), &m))
	require.True(t, m.Equal(decimal.RequireFromString("0.1")), "no float64 on the way")
	require.NoError(t, json.Unmarshal([]byte(`-3`), &m), "the sign is the domain's business (422), not the decoder's")

	for _, bad := range []string{`"1500.00"`, `true`, `{}`, `[1]`} {
		var m money
		require.Error(t, json.Unmarshal([]byte(bad), &m), bad)
	}
	var req priceRequest
	require.NoError(t, json.Unmarshal([]byte(`{"amount":null}`), &req))
	require.Nil(t, req.Amount, "null is absent")
}

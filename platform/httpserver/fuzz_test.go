package httpserver_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/httpserver"
)

// FuzzDecodeJSON: the request decoder never panics, refuses only with 400,
// and a body it accepts means one thing: written back and read again, it
// gives the same request.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"packageId":"9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11","count":2,"targets":[{"targetKind":"Project","targetId":"5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11"}],"note":"n"}`,
		`{"count":1,"count":2}`,
		`{"Count":1}`,
		`{"packageId":"urn:uuid:9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11"}`,
		`{"note":"\u0000"}`,
		`{"targets":[{"targetKind":7}]}`,
		`null`, `[]`, `{`, "{\"note\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var req bindRequest
		if err := httpserver.DecodeJSON(data, &req); err != nil {
			require.Equal(t, apperror.KindMalformed, apperror.KindOf(err), "%v", err)
			return
		}
		again, err := json.Marshal(req)
		require.NoError(t, err)
		var back bindRequest
		require.NoError(t, httpserver.DecodeJSON(again, &back), "what it accepted, written back: %s", again)
		require.Equal(t, req, back)
	})
}

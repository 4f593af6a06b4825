package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestRunLoadCountsSuccessesAndErrors checks the load generator's
// bookkeeping against a stand-in server that answers every third request
// with a 500: requests in the warm-up are not counted, errors are counted
// by kind and left out of the latencies, and the body it sends is a
// purchase of 1 to 3 Project targets with the bearer token.
func TestRunLoadCountsSuccessesAndErrors(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			PackageID uuid.UUID `json:"packageId"`
			Targets   []struct {
				TargetKind string    `json:"targetKind"`
				TargetID   uuid.UUID `json:"targetId"`
			} `json:"targets"`
		}
		if r.URL.Path != pathPurchases || r.Header.Get("Authorization") != "Bearer tok" ||
			json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Targets) < 1 || len(body.Targets) > 3 ||
			body.Targets[0].TargetKind != "Project" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if n.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	res, err := runLoad(context.Background(), loadConfig{
		BaseURL: srv.URL, TenantToken: "tok", PackageID: uuid.New(),
		Clients: 4, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	require.Positive(t, res.Requests)
	require.Less(t, int64(res.Requests), n.Load(), "warm-up requests are not counted")
	require.Equal(t, res.Errors, res.ErrorKinds["HTTP 500"], "the only errors are the 500s: %v", res.ErrorKinds)
	require.InDelta(t, float64(res.Requests)/3, float64(res.Errors), float64(res.Requests)/10+2)
	require.Len(t, res.Latencies, res.Requests-res.Errors)
	require.LessOrEqual(t, res.Percentile(50), res.Percentile(99))
	require.Positive(t, res.PerSecond())
}

func TestReadMemoryOfThisProcess(t *testing.T) {
	t.Parallel()
	m, err := readMemory(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, m.RSS)
	require.GreaterOrEqual(t, m.HWM, m.RSS)
}

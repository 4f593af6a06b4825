package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
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

// TestRunLoadPacesDrawsTargetsAndCancels: with a rate, a pool of targets and
// cancellations, the requests stay under the rate, every target comes from
// the pool, and each client cancels its own purchases, oldest first, once
// it holds more than CancelAfter of them.
func TestRunLoadPacesDrawsTargetsAndCancels(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	bought := map[uuid.UUID]bool{}
	seenTargets := map[uuid.UUID]bool{}
	var purchases, cancels, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == pathPurchases {
			var body struct {
				Targets []struct {
					TargetID uuid.UUID `json:"targetId"`
				} `json:"targets"`
			}
			if json.NewDecoder(r.Body).Decode(&body) != nil {
				bad.Add(1)
			}
			for _, tg := range body.Targets {
				seenTargets[tg.TargetID] = true
			}
			id := uuid.New()
			bought[id] = true
			purchases.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"id":%q}`, id)
			return
		}
		id, err := uuid.Parse(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, pathPurchases+"/"), "/cancel"))
		if err != nil || !bought[id] {
			bad.Add(1)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		delete(bought, id)
		cancels.Add(1)
	}))
	t.Cleanup(srv.Close)

	res, err := runLoad(context.Background(), loadConfig{
		BaseURL: srv.URL, TenantToken: "tok", PackageID: uuid.New(), Clients: 2,
		Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Rate: 100, Targets: 5, CancelAfter: 2,
	})
	require.NoError(t, err)
	require.Zero(t, res.Errors, res.ErrorKinds)
	require.Zero(t, bad.Load())
	require.LessOrEqual(t, purchases.Load()+cancels.Load(), int64(100*0.6)+2, "at most Rate requests per second")
	require.Positive(t, cancels.Load())
	require.Equal(t, purchases.Load()-cancels.Load(), int64(len(bought)))
	require.LessOrEqual(t, len(bought), 2*(2+1), "each client holds at most CancelAfter+1 purchases")
	require.LessOrEqual(t, len(seenTargets), 5, "targets come from the pool")
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Paths of the API under load (docs/api/openapi.yaml).
const (
	pathPurchases = "/api/developers/v1/promotions"
	pathPackages  = "/api/admin/v1/promotion-packages"
)

// loadConfig is one load run: Clients goroutines, each POSTing purchases
// one after the other for Duration after a Warmup that is not counted.
type loadConfig struct {
	BaseURL     string
	TenantToken string
	PackageID   uuid.UUID
	Clients     int
	Duration    time.Duration
	Warmup      time.Duration
	// Rate caps the requests per second of all clients together; 0 is no cap.
	Rate float64
	// Targets is the size of the pool the purchases' targets are drawn
	// from, so that targets are bought again and again; 0 gives every
	// purchase new targets.
	Targets int
	// CancelAfter, when positive, has each client cancel the purchase it
	// made that many purchases earlier: every request, purchase or cancel,
	// then publishes one event, and the projections see targets come and go.
	CancelAfter int
}

// loadResult is what a run measured. Only requests that started inside the
// measured window count; an error is any transport failure or any status
// other than 201.
type loadResult struct {
	Requests  int
	Errors    int
	Elapsed   time.Duration
	Latencies []time.Duration // of the successful requests, sorted
	// ErrorKinds counts errors by status code or transport error text.
	ErrorKinds map[string]int
}

// PerSecond is the rate of successful purchases.
func (r loadResult) PerSecond() float64 {
	return float64(r.Requests-r.Errors) / r.Elapsed.Seconds()
}

// Percentile returns the q-th percentile latency (q in 0..100).
func (r loadResult) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := min(int(float64(len(r.Latencies))*q/100), len(r.Latencies)-1)
	return r.Latencies[i]
}

// merge pools r and other, as if one run had made both's requests.
func (r loadResult) merge(other loadResult) loadResult {
	kinds := maps.Clone(r.ErrorKinds)
	if kinds == nil {
		kinds = map[string]int{}
	}
	for k, n := range other.ErrorKinds {
		kinds[k] += n
	}
	latencies := slices.Concat(r.Latencies, other.Latencies)
	slices.Sort(latencies)
	return loadResult{
		Requests:   r.Requests + other.Requests,
		Errors:     r.Errors + other.Errors,
		Elapsed:    r.Elapsed + other.Elapsed,
		Latencies:  latencies,
		ErrorKinds: kinds,
	}
}

// newHTTPClient keeps one connection per client alive, as a real client
// pool would, so the run measures the API and not TCP handshakes.
func newHTTPClient(clients int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        clients * 2,
			MaxIdleConnsPerHost: clients * 2,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// runLoad runs cfg against the API.
func runLoad(ctx context.Context, cfg loadConfig) (loadResult, error) {
	if cfg.Clients <= 0 || cfg.Duration <= 0 || cfg.TenantToken == "" || cfg.PackageID == uuid.Nil {
		return loadResult{}, errors.New("pinload: clients, duration, token and package are required")
	}
	client := newHTTPClient(cfg.Clients)
	defer client.CloseIdleConnections()

	var pace <-chan time.Time
	if cfg.Rate > 0 {
		ticker := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
		defer ticker.Stop()
		pace = ticker.C
	}
	pool := make([]uuid.UUID, cfg.Targets)
	for i := range pool {
		pool[i] = uuid.New()
	}

	started := time.Now()
	measureFrom := started.Add(cfg.Warmup)
	measureUntil := measureFrom.Add(cfg.Duration)
	type sample struct {
		latency time.Duration
		errKind string
	}
	perClient := make([][]sample, cfg.Clients)
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bought []uuid.UUID // this client's purchases not cancelled yet, oldest first
			for i := 0; ctx.Err() == nil; i++ {
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						return
					}
				}
				at := time.Now()
				if !at.Before(measureUntil) {
					return
				}
				var errKind string
				if cfg.CancelAfter > 0 && len(bought) > cfg.CancelAfter {
					errKind = cancelPurchase(ctx, client, cfg, bought[0])
					bought = bought[1:]
				} else {
					var id uuid.UUID
					id, errKind = purchase(ctx, client, cfg, pool, c*1_000_000+i)
					if errKind == "" {
						bought = append(bought, id)
					}
				}
				if at.Before(measureFrom) {
					continue
				}
				perClient[c] = append(perClient[c], sample{time.Since(at), errKind})
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return loadResult{}, err
	}
	res := loadResult{Elapsed: time.Since(measureFrom), ErrorKinds: map[string]int{}}
	for _, samples := range perClient {
		for _, s := range samples {
			res.Requests++
			if s.errKind != "" {
				res.Errors++
				res.ErrorKinds[s.errKind]++
				continue
			}
			res.Latencies = append(res.Latencies, s.latency)
		}
	}
	slices.Sort(res.Latencies)
	return res, nil
}

// purchase POSTs one purchase of 1 to 3 Project targets, new ones or drawn
// from pool, and returns its id and "" on 201, else what went wrong.
func purchase(ctx context.Context, client *http.Client, cfg loadConfig, pool []uuid.UUID, n int) (uuid.UUID, string) {
	type target struct {
		TargetKind string    `json:"targetKind"`
		TargetID   uuid.UUID `json:"targetId"`
	}
	body := struct {
		PackageID uuid.UUID `json:"packageId"`
		Targets   []target  `json:"targets"`
	}{PackageID: cfg.PackageID}
	for k := range 1 + n%3 {
		id := uuid.New()
		if len(pool) > 0 {
			// Consecutive pool entries: never the same target twice in one purchase.
			id = pool[(n*7+k)%len(pool)]
		}
		body.Targets = append(body.Targets, target{TargetKind: "Project", TargetID: id})
	}
	data, err := json.Marshal(body)
	if err != nil {
		return uuid.Nil, "encode: " + err.Error()
	}
	resp, errKind := post(ctx, client, cfg, pathPurchases, data, http.StatusCreated)
	if errKind != "" {
		return uuid.Nil, errKind
	}
	var created struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(resp, &created); err != nil && cfg.CancelAfter > 0 {
		return uuid.Nil, "decode: " + err.Error()
	}
	return created.ID, ""
}

// cancelPurchase cancels the purchase id and returns "" on 200, else what
// went wrong.
func cancelPurchase(ctx context.Context, client *http.Client, cfg loadConfig, id uuid.UUID) string {
	_, errKind := post(ctx, client, cfg, pathPurchases+"/"+id.String()+"/cancel", []byte(`{"reason":"pinload"}`), http.StatusOK)
	return errKind
}

// post sends data to path with the tenant's token and returns the response
// body and "" when the status is want, else what went wrong.
func post(ctx context.Context, client *http.Client, cfg loadConfig, path string, data []byte, want int) ([]byte, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.BaseURL+path, bytes.NewReader(data))
	if err != nil {
		return nil, "request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cfg.TenantToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "transport: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	// Read the body: the response is part of what the API does, and a
	// connection is only reused once its body was read.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "read: " + err.Error()
	}
	if resp.StatusCode != want {
		return nil, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return body, ""
}

// createPackage creates an active ProjectBoost package through the admin
// API and returns its id.
func createPackage(ctx context.Context, baseURL, adminToken string) (uuid.UUID, error) {
	body := fmt.Sprintf(`{"code":"pinload-%d","name":"Load test boost","kind":"ProjectBoost",`+
		`"durationDays":7,"boostWeight":10,"price":{"amount":1500.00,"currencyId":643}}`, time.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+pathPackages, strings.NewReader(body))
	if err != nil {
		return uuid.Nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return uuid.Nil, fmt.Errorf("create package: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return uuid.Nil, fmt.Errorf("create package: HTTP %d: %s", resp.StatusCode, data)
	}
	var pkg struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return uuid.Nil, fmt.Errorf("create package: %w", err)
	}
	return pkg.ID, nil
}

// waitReady polls GET /readyz until it answers 200.
func waitReady(ctx context.Context, baseURL string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/readyz not ready within %s (last error: %v)", baseURL, within, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// summary is the result in words, errors by kind.
func (r loadResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in %s: %.0f purchases/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d errors",
		r.Requests, r.Elapsed.Round(time.Millisecond), r.PerSecond(),
		ms(r.Percentile(50)), ms(r.Percentile(99)), ms(r.Percentile(100)), r.Errors)
	kinds := make([]string, 0, len(r.ErrorKinds))
	for k := range r.ErrorKinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n  %6d × %s", r.ErrorKinds[k], k)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

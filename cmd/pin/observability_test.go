package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireTracedPurchase checks, on the running binary, what a Go service's
// operator expects after a purchase (POST /promotions, once): its access log
// line carries its trace and span ids; /metrics scraped as OpenMetrics links
// the request's duration bucket to that same trace (an exemplar); and both
// database pools export their statistics (go_sql_*, by db_name).
func requireTracedPurchase(t *testing.T, s *server) {
	t.Helper()
	var traceID string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		traceID = ""
		for line := range strings.SplitSeq(s.out.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue // the banner
			}
			if rec["msg"] == "http request" && rec["method"] == http.MethodPost && rec["route"] == "/api/developers/v1/promotions" {
				assert.Regexp(c, `^[0-9a-f]{16}$`, rec["span_id"], line)
				traceID, _ = rec["trace_id"].(string)
			}
		}
		assert.Regexp(c, `^[0-9a-f]{32}$`, traceID, "the purchase's access log line has its trace id")
	}, 10*time.Second, 20*time.Millisecond)

	req, err := http.NewRequest(http.MethodGet, s.base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Contains(t, resp.Header.Get("Content-Type"), "application/openmetrics-text")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	metrics := string(body)

	exemplar := regexp.MustCompile(`(?m)^pin_http_request_duration_seconds_bucket\{method="POST",route="/api/developers/v1/promotions",le="[^"]+"\} 1 # \{trace_id="` + traceID + `"\} `)
	require.Regexp(t, exemplar, metrics, "the purchase's duration bucket links to its trace")
	for _, pool := range []string{"pin", "pin_api"} {
		require.Regexp(t, `(?m)^go_sql_open_connections\{db_name="`+pool+`"\} [0-9.e+]+$`, metrics, "pool %s exports its statistics", pool)
		require.Regexp(t, `(?m)^go_sql_wait_count_total\{db_name="`+pool+`"\} [0-9.e+]+$`, metrics, "pool %s", pool)
	}
}

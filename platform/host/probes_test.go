package host_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/postgres"
)

// TestReadyzAnswersAReasonCodeAndLogsTheDetail shows that /readyz tells a
// stranger only the short reason, while the error's text (host, user) goes
// to the log.
func TestReadyzAnswersAReasonCodeAndLogsTheDetail(t *testing.T) {
	t.Parallel()
	detail := errors.New(`dial tcp db.internal:5432: password authentication failed for user "pin_owner"`)
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantBody   string
	}{
		{"ready", nil, http.StatusOK, `{"status":"ready"}`},
		{"unreachable", &postgres.NotReadyError{Reason: postgres.ReasonUnreachable, Err: detail}, http.StatusServiceUnavailable, `{"status":"not ready","reason":"database_unreachable"}`},
		{"read-only", &postgres.NotReadyError{Reason: postgres.ReasonReadOnly, Err: detail}, http.StatusServiceUnavailable, `{"status":"not ready","reason":"database_read_only"}`},
		{"pending", &postgres.NotReadyError{Reason: postgres.ReasonMigrationsPending, Err: detail}, http.StatusServiceUnavailable, `{"status":"not ready","reason":"migrations_pending"}`},
		{"no reason", detail, http.StatusServiceUnavailable, `{"status":"not ready","reason":"not_ready"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			e := echo.New()
			host.RegisterProbes(e, func(context.Context) error { return tt.err }, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			require.Equal(t, tt.wantStatus, rec.Code)
			require.JSONEq(t, tt.wantBody, rec.Body.String())
			require.NotContains(t, rec.Body.String(), "pin_owner")
			if tt.err != nil {
				require.Contains(t, logs.String(), "pin_owner", "the detail is in the log")
			}
		})
	}
}

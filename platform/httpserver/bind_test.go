package httpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/httpserver"
)

type bindTarget struct {
	TargetKind string    `json:"targetKind"`
	TargetID   uuid.UUID `json:"targetId"`
}

type bindRequest struct {
	PackageID uuid.UUID    `json:"packageId"`
	Count     int          `json:"count"`
	Targets   []bindTarget `json:"targets"`
	Note      *string      `json:"note"`
}

const uuidMessage = "must be a UUID string of 36 characters (8-4-4-4-12 hexadecimal digits)"

func TestBind(t *testing.T) {
	t.Parallel()

	valid := `{"packageId":"9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11","count":2,` +
		`"targets":[{"targetKind":"Project","targetId":"5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11"}]}`
	tests := []struct {
		name   string
		body   string
		status int
		errors []map[string]string
	}{
		{name: "valid", body: valid, status: http.StatusOK},
		{name: "valid with surrounding whitespace", body: "\n  " + valid + " \n", status: http.StatusOK},
		{name: "empty body", body: "", status: http.StatusBadRequest},
		{name: "whitespace only", body: "  \n", status: http.StatusBadRequest},
		{name: "bare null", body: "null", status: http.StatusBadRequest},
		{name: "syntax error", body: `{"count": 2,}`, status: http.StatusBadRequest},
		{name: "truncated", body: `{"count": 2`, status: http.StatusBadRequest},
		{name: "not an object", body: `[1,2]`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "(body)", "message": "must be an object"}}},
		{name: "wrong type", body: `{"count": "two"}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "count", "message": "must be an integer"}}},
		{name: "fraction for an integer", body: `{"count": 2.5}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "count", "message": "must be an integer in range"}}},
		{name: "nested wrong type", body: `{"targets":[{"targetKind": 7}]}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "targets[0].targetKind", "message": "must be a string"}}},
		{name: "number for a uuid", body: `{"packageId": 5}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "packageId", "message": uuidMessage}}},
		{name: "unknown field", body: `{"count": 1, "boostWieght": 5}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "boostWieght", "message": "unknown field"}}},
		{name: "unknown nested field", body: `{"targets":[{"targetKind":"Project","extra":1}]}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "targets[0].extra", "message": "unknown field"}}},
		{name: "trailing garbage", body: valid + ` x`, status: http.StatusBadRequest},
		{name: "second document", body: valid + valid, status: http.StatusBadRequest},
		{name: "bad uuid", body: `{"packageId":"nope"}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "packageId", "message": uuidMessage}}},
		{name: "urn uuid", body: `{"packageId":"urn:uuid:9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11"}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "packageId", "message": uuidMessage}}},
		{name: "hyphen-less uuid", body: `{"targets":[{"targetId":"5f0c3a528d0e4a529a772b7a8f0e6c11"}]}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "targets[0].targetId", "message": uuidMessage}}},
		{name: "braced uuid", body: `{"packageId":"{9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11}"}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "packageId", "message": uuidMessage}}},
		{name: "upper-case uuid", body: `{"packageId":"9F1C7A52-8D0E-4A52-9A77-2B7A8F0E6C11"}`, status: http.StatusOK},
		{name: "null uuid", body: `{"packageId":null}`, status: http.StatusOK},
		{name: "duplicate key", body: `{"count":1,"count":2}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "count", "message": "appears more than once"}}},
		{name: "nested duplicate key", body: `{"targets":[{"targetKind":"Project","targetKind":"Post"}]}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "targets[0].targetKind", "message": "appears more than once"}}},
		{name: "key in another case", body: `{"count":1,"Count":2}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "Count", "message": "unknown field"}}},
		{name: "only a key in another case", body: `{"PackageID":"9f1c7a52-8d0e-4a52-9a77-2b7a8f0e6c11"}`, status: http.StatusBadRequest,
			errors: []map[string]string{{"field": "PackageID", "message": "unknown field"}}},
		{name: "invalid UTF-8", body: "{\"note\":\"\xff\"}", status: http.StatusBadRequest},
		{name: "over the limit", body: `{"note":"` + strings.Repeat("a", 2048) + `"}`, status: http.StatusRequestEntityTooLarge},
	}

	b := newTestBundle(t, httpserver.Config{BodyLimit: "1K"})
	b.e.POST("/bind", func(c *echo.Context) error {
		var req bindRequest
		if err := httpserver.Bind(c, &req); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, req)
	})
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)

	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			name := tt.name
			if chunked {
				name += " (chunked)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var body io.Reader = strings.NewReader(tt.body)
				if chunked {
					body = io.MultiReader(body) // unknown length: no Content-Length
				}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/bind", body)
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				defer func() { _ = resp.Body.Close() }()
				data := readAll(t, resp.Body)

				require.Equal(t, tt.status, resp.StatusCode, "body: %s", data)
				if tt.status == http.StatusOK {
					return
				}
				p := decodeProblem(t, resp.Header, data)
				require.NotEmpty(t, p.Detail)
				require.Equal(t, tt.errors, p.Errors)
				if tt.status == http.StatusBadRequest {
					require.Equal(t, "https://pin.dev/problems/malformed-request", p.Type)
				}
			})
		}
	}
}

func TestBindReturnsApplicationErrors(t *testing.T) {
	t.Parallel()

	// Without New's middleware Bind still applies the default limit.
	e := echo.New()
	bind := func(body string) error {
		c := e.NewContext(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)), httptest.NewRecorder())
		var dst bindRequest
		return httpserver.Bind(c, &dst)
	}
	require.Equal(t, apperror.KindMalformed, apperror.KindOf(bind(`{`)))
	require.Equal(t, apperror.KindTooLarge, apperror.KindOf(bind(`"`+strings.Repeat("a", 64*1024)+`"`)))
	require.NoError(t, bind(`{"count": 1}`))

	// A non-pointer destination is our bug: an internal error.
	c := e.NewContext(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`)), httptest.NewRecorder())
	err := httpserver.Bind(c, bindRequest{})
	require.Error(t, err)
	require.Equal(t, apperror.KindInternal, apperror.KindOf(err))
}

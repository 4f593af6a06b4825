package promotion_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
)

// TestRoutesMatchOpenAPI checks both directions: every route the module
// registers is a documented operation, and every documented operation is
// registered.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := loadOpenAPI()
	require.NoError(t, err)
	b := newTestBundle(t)

	var registered []string
	for _, r := range b.e.Routes() {
		if strings.HasPrefix(r.Method, "echo_") { // echo's own not-found helpers
			continue
		}
		registered = append(registered, r.Method+" "+echoPathToOpenAPI(r.Path))
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	require.Equal(t, documented, registered)
	require.Len(t, registered, 7)
}

// echoPathToOpenAPI turns /a/:id/b into /a/{id}/b.
func echoPathToOpenAPI(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if name, ok := strings.CutPrefix(part, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

func TestEchoPathToOpenAPI(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/a/{id}/b/{x}", echoPathToOpenAPI("/a/:id/b/:x"))
	require.Equal(t, "/a/b", echoPathToOpenAPI("/a/b"))
}

// TestOpenAPIValidationCanFail proves that the response check used by every
// API test rejects what it should: otherwise those tests would pass
// vacuously.
func TestOpenAPIValidationCanFail(t *testing.T) {
	t.Parallel()
	get := request{method: http.MethodGet, path: purchasePath(uuid.NewString())}
	json := http.Header{echo.HeaderContentType: []string{echo.MIMEApplicationJSON}}
	problem := http.Header{echo.HeaderContentType: []string{"application/problem+json"}}

	tests := []struct {
		name string
		req  request
		res  response
	}{
		{"undocumented status", get, response{status: http.StatusTeapot, header: problem,
			body: []byte(`{"type":"x","title":"t","status":418}`)}},
		{"missing required field", get, response{status: http.StatusOK, header: json, body: []byte(`{"id":"x"}`)}},
		{"nextCursor of the wrong type", request{method: http.MethodGet, path: purchasesPath}, response{status: http.StatusOK, header: json,
			body: []byte(`{"items":[],"nextCursor":5}`)}},
		{"problem without title", get, response{status: http.StatusNotFound, header: problem, body: []byte(`{"type":"x","status":404}`)}},
		{"validation problem without errors", request{method: http.MethodPost, path: purchasesPath}, response{
			status: http.StatusUnprocessableEntity, header: problem, body: []byte(`{"type":"x","title":"t","status":422}`)}},
		{"undocumented route", request{method: http.MethodDelete, path: purchasesPath}, response{status: http.StatusOK, header: json, body: []byte(`{}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, openAPIMismatch(tt.req, tt.res))
		})
	}
	ok := response{status: http.StatusOK, header: json, body: []byte(`{"items":[],"nextCursor":null}`)}
	require.NoError(t, openAPIMismatch(request{method: http.MethodGet, path: purchasesPath}, ok), "the baseline passes")
}

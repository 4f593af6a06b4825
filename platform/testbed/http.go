package testbed

import (
	"io"
	"net/http"
	"testing"
)

// Get fetches url with a plain GET and returns the status and the body; a
// failed request or read fails tb.
func Get(tb testing.TB, url string) (status int, body string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("testbed: GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("testbed: GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(raw)
}

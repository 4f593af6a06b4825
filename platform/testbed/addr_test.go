package testbed_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// Two addresses a test asks for in a row (an HTTP server's and a broker's)
// must differ, even when the kernel offers a port just closed again.
func TestFreePortNeverRepeatsInAProcess(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		port := testbed.FreePort(t)
		require.False(t, seen[port], "port %d handed out twice", port)
		seen[port] = true
	}
}

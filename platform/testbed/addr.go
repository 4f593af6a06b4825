package testbed

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// handedOut holds every port FreePort returned in this process: the kernel
// may give a port just closed to the next request, and two calls in a row
// (an HTTP address and a broker's, say) must not get the same one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no earlier call in this process returned, for a process or broker
// the test starts on it (another process may still take it first; tests
// that can pass a listener should do so instead).
func FreePort(tb testing.TB) int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("testbed: free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			tb.Fatalf("testbed: free port: %v", err)
		}
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// FreeAddr is FreePort as a host:port address.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(tb))
}

package testbed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DatabaseHost stands for one host of a replicated PostgreSQL: a TCP proxy
// to the test server that SetReadOnly turns into a standby or a demoted
// primary. Its new sessions start with default_transaction_read_only, and
// its open ones are switched to it before their next statement, so a
// pool sees SQLSTATE 25006 as it would after a failover, on the test's own
// database only (the shared server is never touched).
type DatabaseHost struct {
	ln       net.Listener
	upstream string
	readOnly atomic.Bool
	// epoch counts SetReadOnly(true) calls; a session is switched when it
	// has seen fewer.
	epoch atomic.Int64
	// sessions counts the connections the host accepted.
	sessions atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// StartDatabaseHost starts a host in front of the server of BaseURL,
// writable; it stops, and closes its sessions, when the test ends.
func StartDatabaseHost(tb testing.TB) *DatabaseHost {
	tb.Helper()
	base, err := url.Parse(BaseURL())
	if err != nil {
		tb.Fatalf("testbed: database host: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testbed: database host: %v", err)
	}
	h := &DatabaseHost{ln: ln, upstream: base.Host, conns: map[net.Conn]bool{}}
	h.wg.Go(h.accept)
	tb.Cleanup(h.Stop)
	return h
}

// Addr is the host's host:port.
func (h *DatabaseHost) Addr() string { return h.ln.Addr().String() }

// Sessions is how many connections the host has accepted: the sessions
// its clients opened, for a test that bounds how many an outage costs.
func (h *DatabaseHost) Sessions() int64 { return h.sessions.Load() }

// SetReadOnly makes the host refuse writes (on) or take them (off) in new
// sessions; on also switches the open ones, as a demotion leaves them.
func (h *DatabaseHost) SetReadOnly(on bool) {
	if on {
		h.epoch.Add(1)
	}
	h.readOnly.Store(on)
}

// HostListURL returns dbURL with its host replaced by hosts, in order,
// and the given query parameters added (target_session_attrs, say).
func HostListURL(tb testing.TB, dbURL string, hosts []string, params url.Values) string {
	tb.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("testbed: host list URL: %v", err)
	}
	u.Host = strings.Join(hosts, ",")
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Stop stops the host as a primary stops: its sessions are closed and
// its port refuses connections from then on.
func (h *DatabaseHost) Stop() {
	// The sessions first: once a client is refused a connection, none of
	// its statements still succeeds here. A session accepted meanwhile is
	// refused by track.
	h.mu.Lock()
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	_ = h.ln.Close()
	h.wg.Wait()
}

func (h *DatabaseHost) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns == nil {
		return false
	}
	h.conns[c] = true
	return true
}

func (h *DatabaseHost) accept() {
	for {
		client, err := h.ln.Accept()
		if err != nil {
			h.mu.Lock()
			h.conns = nil
			h.mu.Unlock()
			return
		}
		h.sessions.Add(1)
		h.wg.Go(func() { h.serve(client) })
	}
}

// Protocol constants of the startup phase (PostgreSQL protocol 3).
const (
	sslRequestCode = 80877103
	gssRequestCode = 80877104
)

// serve proxies one session: the startup message, rewritten when the host
// is read-only, then messages both ways, with a SET injected ahead of the
// client's next one when a demotion finds the server idle.
func (h *DatabaseHost) serve(client net.Conn) {
	defer func() { _ = client.Close() }()
	server, err := net.Dial("tcp", h.upstream)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	if !h.track(client) || !h.track(server) {
		return
	}
	startup, err := readStartup(client)
	if err != nil {
		return
	}
	s := &proxiedSession{h: h, client: client, server: server, epoch: h.epoch.Load()}
	if h.readOnly.Load() {
		startup = withReadOnlyOption(startup)
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	done := make(chan struct{})
	go func() { defer close(done); s.toClient() }()
	s.toServer()
	_ = server.Close()
	_ = client.Close()
	<-done
}

// readStartup reads the client's startup message, refusing TLS and GSS
// encryption (the test server is reached with sslmode=disable or prefer).
func readStartup(c net.Conn) ([]byte, error) {
	for {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return nil, err
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n < 8 || n > 10000 {
			return nil, errors.New("testbed: database host: bad startup length")
		}
		msg := make([]byte, n)
		copy(msg, head[:])
		if _, err := io.ReadFull(c, msg[8:]); err != nil {
			return nil, err
		}
		if code := binary.BigEndian.Uint32(head[4:]); code == sslRequestCode || code == gssRequestCode {
			if _, err := c.Write([]byte{'N'}); err != nil {
				return nil, err
			}
			continue
		}
		return msg, nil
	}
}

// withReadOnlyOption adds "-c default_transaction_read_only=on" to a
// startup message's options.
func withReadOnlyOption(startup []byte) []byte {
	const opt = "-c default_transaction_read_only=on"
	if binary.BigEndian.Uint32(startup[4:8])>>16 != 3 { // a cancel request
		return startup
	}
	params := bytes.TrimSuffix(startup[8:], []byte{0, 0})
	fields := bytes.Split(params, []byte{0})
	found := false
	for i := 0; i+1 < len(fields); i += 2 {
		if string(fields[i]) == "options" {
			fields[i+1], found = append(append(fields[i+1], ' '), opt...), true
		}
	}
	if !found {
		fields = append(fields, []byte("options"), []byte(opt))
	}
	body := append(bytes.Join(fields, []byte{0}), 0, 0)
	out := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(out[:4], uint32(8+len(body)))
	copy(out[4:8], startup[4:8])
	return append(out, body...)
}

// proxiedSession is one client's session through a DatabaseHost.
type proxiedSession struct {
	h              *DatabaseHost
	client, server net.Conn
	mu             sync.Mutex
	// idle: the server's last ReadyForQuery said idle and the client has
	// sent nothing since, so a statement can go ahead of the client's next.
	idle bool
	// swallow: the server's answers up to the next ReadyForQuery are to the
	// injected SET, not to the client.
	swallow bool
	epoch   int64
}

// readMessage reads one typed message (type byte, length, body).
func readMessage(r io.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<30 {
		return nil, errors.New("testbed: database host: bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

func (s *proxiedSession) toServer() {
	for {
		msg, err := readMessage(s.client)
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.idle && s.h.readOnly.Load() && s.epoch < s.h.epoch.Load() {
			s.epoch, s.swallow = s.h.epoch.Load(), true
			if _, err := s.server.Write(simpleQuery("SET default_transaction_read_only = on")); err != nil {
				s.mu.Unlock()
				return
			}
		}
		s.idle = false
		s.mu.Unlock()
		if _, err := s.server.Write(msg); err != nil {
			return
		}
	}
}

func (s *proxiedSession) toClient() {
	for {
		msg, err := readMessage(s.server)
		if err != nil {
			_ = s.client.Close()
			return
		}
		s.mu.Lock()
		if s.swallow && msg[0] != 'S' { // ParameterStatus goes on: the client learns the session is read-only
			s.swallow = msg[0] != 'Z'
			s.mu.Unlock()
			continue
		}
		if msg[0] == 'Z' && len(msg) == 6 && msg[5] == 'I' {
			s.idle = true
		}
		s.mu.Unlock()
		if _, err := s.client.Write(msg); err != nil {
			return
		}
	}
}

// simpleQuery is a Query ('Q') message.
func simpleQuery(sql string) []byte {
	msg := []byte{'Q', 0, 0, 0, 0}
	msg = append(msg, sql...)
	msg = append(msg, 0)
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(msg)-1))
	return msg
}

// Fence makes d read-only (on) or writable again as an operator fences a
// primary: default_transaction_read_only for its new sessions, and its
// open ones ended. Only d is touched; the server is shared.
func (d *Database) Fence(tb testing.TB, on bool) {
	tb.Helper()
	srv, err := getServer(tb.Context())
	if err != nil {
		tb.Fatalf("testbed: fence: %v", err)
	}
	name := pgx.Identifier{d.Name}.Sanitize()
	if _, err := srv.admin.ExecContext(tb.Context(), fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_read_only = %t`, name, on)); err != nil {
		tb.Fatalf("testbed: fence %s: %v", d.Name, err)
	}
	if _, err := srv.admin.ExecContext(tb.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, d.Name); err != nil {
		tb.Fatalf("testbed: fence %s: %v", d.Name, err)
	}
}

package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// NoWritableDatabaseError is a connection that found no host of the URL
// taking writes (target_session_attrs=read-write): each was read-only or
// could not be reached. It says so and names the hosts tried, where pgx's
// error is a block of one line per address; it unwraps to pgx's error, so
// IsReadOnly and IsTransient still hold.
type NoWritableDatabaseError struct {
	// Tried is each address tried, as "host:port (name): read-only" or
	// with why it could not be reached.
	Tried []string
	err   error
}

func (e *NoWritableDatabaseError) Error() string {
	return "no writable database: tried " + strings.Join(e.Tried, "; ")
}

func (e *NoWritableDatabaseError) Unwrap() error { return e.err }

// noWritableDatabase turns a failed connection into a
// NoWritableDatabaseError when a host refused it as read-only; any other
// error is returned as it is.
func noWritableDatabase(err error) error {
	var connErr *pgconn.ConnectError
	if !errors.As(err, &connErr) || !errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return err
	}
	attempts := []error{connErr.Unwrap()}
	if joined, ok := connErr.Unwrap().(interface{ Unwrap() []error }); ok {
		attempts = joined.Unwrap()
	}
	tried := make([]string, 0, len(attempts))
	for _, a := range attempts {
		// pgx words each attempt "host:port (name): why".
		addr, why, _ := strings.Cut(a.Error(), "): ")
		if errors.Is(a, pgconn.ErrReadOnlyConnection) {
			why = "read-only"
		}
		tried = append(tried, addr+"): "+why)
	}
	return &NoWritableDatabaseError{Tried: tried, err: err}
}

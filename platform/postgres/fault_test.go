package postgres_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
)

// TestFaultOfEachSQLStateClass: only classes 22 and 23 are the data's
// fault; every other class, listed or not, is the database's.
func TestFaultOfEachSQLStateClass(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]postgres.Fault{
		"42501": postgres.FaultOfDatabase, // insufficient_privilege
		"42P01": postgres.FaultOfDatabase, // undefined_table
		"55P03": postgres.FaultOfDatabase, // lock_not_available
		"57014": postgres.FaultOfDatabase, // query_canceled
		"57P01": postgres.FaultOfDatabase, // admin_shutdown
		"08006": postgres.FaultOfDatabase, // connection_failure
		"53300": postgres.FaultOfDatabase, // too_many_connections
		"40001": postgres.FaultOfDatabase, // serialization_failure
		"40P01": postgres.FaultOfDatabase, // deadlock_detected
		"25P02": postgres.FaultOfDatabase, // in_failed_sql_transaction
		"XX000": postgres.FaultOfDatabase, // internal_error
		"58030": postgres.FaultOfDatabase, // io_error
		"P0001": postgres.FaultOfDatabase, // raise_exception
		"0A000": postgres.FaultOfDatabase, // feature_not_supported: a class not listed
		"23514": postgres.FaultOfData,     // check_violation
		"23505": postgres.FaultOfData,     // unique_violation
		"23503": postgres.FaultOfData,     // foreign_key_violation
		"23502": postgres.FaultOfData,     // not_null_violation
		"22P02": postgres.FaultOfData,     // invalid_text_representation
		"22001": postgres.FaultOfData,     // string_data_right_truncation
		"22003": postgres.FaultOfData,     // numeric_value_out_of_range
		"22P05": postgres.FaultOfData,     // untranslatable_character
		"22021": postgres.FaultOfData,     // character_not_in_repertoire
	} {
		err := fmt.Errorf("apply: %w", &pgconn.PgError{Code: code, Message: "test"})
		require.Equal(t, want, postgres.FaultOf(err), "SQLSTATE %s", code)
	}
}

// TestFaultOfAnErrorThatIsNotPostgreSQLs: the way to the database failing
// is the database's fault; a caller's own error is neither's.
func TestFaultOfAnErrorThatIsNotPostgreSQLs(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
		io.ErrUnexpectedEOF,
		driver.ErrBadConn,
		pgconn.ErrConnClosed,
	} {
		require.Equal(t, postgres.FaultOfDatabase, postgres.FaultOf(fmt.Errorf("apply: %w", err)), "%v", err)
	}
	require.Equal(t, postgres.FaultOfCaller, postgres.FaultOf(errors.New("handler refuses")))
	require.Equal(t, postgres.FaultOfCaller, postgres.FaultOf(context.Canceled))
}

// TestTransientErrors: what the API answers 503 rather than 500. A broken
// connection is among them (database/sql gives up with driver.ErrBadConn
// when its retries meet only broken ones, as after a failover), a
// read-only refusal too (ADR 0021); a refusal of the data or the caller's
// own error is not.
func TestTransientErrors(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&pgconn.PgError{Code: "55P03"}, &pgconn.PgError{Code: "57P01"}, &pgconn.PgError{Code: "08006"},
		&pgconn.PgError{Code: "25006"}, pgconn.ErrReadOnlyConnection,
		driver.ErrBadConn, pgconn.ErrConnClosed, io.ErrUnexpectedEOF,
		&net.OpError{Op: "write", Net: "tcp", Err: errors.New("broken pipe")},
	} {
		require.True(t, postgres.IsTransient(fmt.Errorf("insert: %w", err)), "%v", err)
	}
	for _, err := range []error{&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "42P01"}, errors.New("handler refuses")} {
		require.False(t, postgres.IsTransient(fmt.Errorf("insert: %w", err)), "%v", err)
	}
}

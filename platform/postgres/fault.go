package postgres

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Fault is whose fault an error of a statement is, which decides what a
// batch does with it: set one row or record aside, or roll back and retry
// the whole (docs/expire-promotions-job.md#whose-fault, ADR 0006).
type Fault int

const (
	// FaultOfDatabase is a fault of the database, its objects and
	// privileges, or the connection to it: no row is to blame, so the whole
	// transaction rolls back, nothing is set aside, and it is tried again
	// later. It is the zero value: what is not known to be the data's is
	// never a row's.
	FaultOfDatabase Fault = iota
	// FaultOfData is PostgreSQL refusing the values of the statement
	// (SQLSTATE class 22 or 23): the row or record it wrote is at fault,
	// and only that one is set aside.
	FaultOfData
	// FaultOfCaller is an error that came neither from PostgreSQL nor from
	// the connection to it: the caller's own, judged by the caller's rules.
	FaultOfCaller
)

// faultBySQLStateClass is the one table that says whose fault a PostgreSQL
// error is, by SQLSTATE class (its first two characters), when the row's
// own statement raised it. Only the data can be the row's fault; a class
// not listed is the database's.
var faultBySQLStateClass = map[string]Fault{
	"22": FaultOfData,     // data exception: a value of the row
	"23": FaultOfData,     // integrity constraint violation: the row breaks a constraint
	"08": FaultOfDatabase, // connection exception
	"25": FaultOfDatabase, // invalid transaction state
	"40": FaultOfDatabase, // transaction rollback: serialization failure, deadlock
	"42": FaultOfDatabase, // access rule violation: 42501 privilege, 42P01 missing table
	"53": FaultOfDatabase, // insufficient resources
	"55": FaultOfDatabase, // object not in prerequisite state: 55P03 lock not available
	"57": FaultOfDatabase, // operator intervention: 57014 statement timeout, shutdown
	"58": FaultOfDatabase, // system error
	"P0": FaultOfDatabase, // a PL/pgSQL RAISE without a data class: a trigger's verdict, not the data's
	"XX": FaultOfDatabase, // internal error
}

// FaultOf classifies err, an error of one row's or record's own statement:
// a PostgreSQL error by faultBySQLStateClass; a failure to reach, keep or
// time out the connection is the database's; anything else is the caller's.
func FaultOf(err error) Fault {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if len(pgErr.Code) != 5 {
			return FaultOfDatabase
		}
		if f, ok := faultBySQLStateClass[pgErr.Code[:2]]; ok {
			return f
		}
		return FaultOfDatabase
	}
	if isConnectionFault(err) {
		return FaultOfDatabase
	}
	return FaultOfCaller
}

// isConnectionFault is an error of the way to the database rather than of
// a statement: the connection could not be made, broke, was closed or timed
// out.
func isConnectionFault(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Refusal is what a PostgreSQL error says refused a statement. A caller
// tells by it which statement or table raised an error: a constraint of
// another table than the one a row's statement writes is not that row's.
type Refusal struct {
	SQLState string
	// Table is schema-qualified; empty when the error names none (a data
	// exception such as 22P02, a trigger's RAISE).
	Table      string
	Constraint string
}

// RefusalOf returns err's Refusal; ok is false when err holds no
// PostgreSQL error.
func RefusalOf(err error) (r Refusal, ok bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return Refusal{}, false
	}
	r = Refusal{SQLState: pgErr.Code, Constraint: pgErr.ConstraintName}
	if pgErr.TableName != "" {
		r.Table = pgErr.SchemaName + "." + pgErr.TableName
	}
	return r, true
}

// String is "SQLSTATE 23514 on schema.table, constraint c", leaving out
// what the error did not name.
func (r Refusal) String() string {
	s := "SQLSTATE " + r.SQLState
	if r.Table != "" {
		s += " on " + r.Table
	}
	if r.Constraint != "" {
		s += ", constraint " + r.Constraint
	}
	return s
}

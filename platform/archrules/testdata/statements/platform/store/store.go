package store

// A planted store for TestFragmentedStatementsCatchesPlantedFragments: the
// calls in whole run whole statements, each call in fragmented runs one
// that is not.

const readOne = `SELECT id FROM t WHERE id = $1`

const columns = `id, name`

const readJoined = `SELECT ` + columns + ` FROM t`

func whole(ctx context.Context, db *sql.DB, gdb *gorm.DB, conn *pgx.Conn, sqlConn *sql.Conn) {
	db.ExecContext(ctx, `DELETE FROM t WHERE id = $1`, 1)
	db.QueryRowContext(ctx, readOne, 1)
	db.Exec("SELECT 1")
	gdb.Raw(`SELECT 2`)
	conn.Exec(ctx, `SELECT 3`)
	_ = sqlConn.Raw(func(any) error { return nil })
}

// run hands on its caller's statement, which is checked where it is written.
func run(ctx context.Context, db *sql.DB, query string) {
	db.ExecContext(ctx, query)
}

func fragmented(ctx context.Context, db *sql.DB, gdb *gorm.DB, conn *pgx.Conn, where string) {
	db.QueryContext(ctx, `SELECT `+columns+` FROM t`)
	db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s", "t"))
	db.QueryRowContext(ctx, readJoined)
	q := `SELECT 1`
	db.Exec(q)
	gdb.Raw("SELECT * FROM t WHERE " + where)
	conn.Exec(ctx, "SELECT "+"1")
}

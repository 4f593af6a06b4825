package db

// EnsureDatabase is allowed, with its reason, to build its statement.
func EnsureDatabase(ctx context.Context, db *sql.DB, name string) {
	db.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

func drop(ctx context.Context, db *sql.DB, name string) {
	db.ExecContext(ctx, "DROP DATABASE "+name)
}

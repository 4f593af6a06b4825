package testbed

// Test support names throw-away databases: not looked at.
func create(ctx context.Context, db *sql.DB, name string) {
	db.ExecContext(ctx, "CREATE DATABASE "+name)
}

package store

// Test files explain and plant statements of their own: not looked at.
func explain(ctx context.Context, db *sql.DB, query string) {
	db.QueryRowContext(ctx, "EXPLAIN "+query)
}

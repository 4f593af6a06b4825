package postgres

import (
	"database/sql"
	"fmt"
)

// CollectRows scans every row with scan and closes rows, wrapping any error
// with what (the caller's short context, e.g. "outbox: list dead letters").
func CollectRows[T any](rows *sql.Rows, what string, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer func() { _ = rows.Close() }()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Missing returns, as text for the error that names them, the keys of want
// that no row in found has, in want's order.
func Missing[K comparable, T any](want []K, found []T, key func(T) K) []string {
	have := make(map[K]bool, len(found))
	for _, f := range found {
		have[key(f)] = true
	}
	var missing []string
	for _, k := range want {
		if !have[k] {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	return missing
}

package pgtrust

import (
	"context"
	"database/sql"
	"errors"
)

// Queryer is what DB needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// DB returns the Query of a database/sql handle (any driver that sends
// string arguments as text, such as pgx's stdlib and lib/pq). Run Check on
// the handle the fencing statements use: current_user and search_path are
// per connection (a *sql.Conn if the pool's connections may differ).
func DB(db Queryer) Query {
	return func(ctx context.Context, query string, args ...string) ([][]string, error) {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		rows, err := db.QueryContext(ctx, query, a...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		var out [][]string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			row := make([]string, len(cols))
			for i, v := range vals {
				row[i] = v.String
			}
			out = append(out, row)
		}
		return out, errors.Join(rows.Err(), rows.Close())
	}
}

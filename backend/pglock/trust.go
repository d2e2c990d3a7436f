package pglock

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/pgtrust"
)

// ErrUntrustedTable is matched by Connect's error when the token table
// exists but could let someone else rewind the tokens: it is not an
// ordinary permanent table; it or its schema is owned by a role other than
// the connecting one, a superuser or one named by WithTrustedRoles; another
// role (or PUBLIC) holds a privilege on it that allows writes (anything but
// SELECT, REFERENCES, MAINTAIN); it has triggers, rules, row security or
// policies; or a name without a schema resolves through search_path to a
// table outside current_schema(). The error names the table,
// schema-qualified, and the rule. fencesql's table check matches it too.
var ErrUntrustedTable = pgtrust.ErrUntrusted

// WithTrustedRoles names roles trusted with the token table besides the
// connecting role and superusers: they may own it (or its schema) and hold
// write privileges on it. Name the role an administrator created the
// table with, or the group role every locking role is a member of and
// that the write privileges are granted to: each of them can set any
// token, so trust only roles that run this package.
func WithTrustedRoles(roles ...string) Option {
	return func(o *options) { o.trusted = append(o.trusted, roles...) }
}

// checkTable resolves the token table, creates it if missing (as the
// qualified name) and checks it (pgtrust.Check), then keeps its qualified
// name for every statement. Errors: ErrUntrustedTable, ErrTokenTable,
// ctx's cause, or the connection's.
func (s *Session) checkTable(ctx context.Context, conn *pgconn.PgConn, trusted []string) error {
	q := func(ctx context.Context, sql string, args ...string) ([][]string, error) {
		rows, err := query(ctx, conn, sql, args...)
		out := make([][]string, len(rows))
		for i, r := range rows {
			out[i] = make([]string, len(r))
			for j, c := range r {
				out[i][j] = string(c)
			}
		}
		return out, err
	}
	t, err := pgtrust.Check(ctx, q, s.table, trusted)
	if err != nil {
		return fmt.Errorf("pglock: token table: %w", err)
	}
	if !t.Exists {
		if err := s.createTable(ctx, conn, t.Qualified); err != nil {
			return err
		}
		if t, err = pgtrust.Check(ctx, q, s.table, trusted); err != nil {
			return fmt.Errorf("pglock: token table: %w", err)
		}
		if !t.Exists {
			return fmt.Errorf("%w: %s vanished after its creation", ErrTokenTable, t.Qualified)
		}
	}
	s.table = t.Qualified
	return s.prepareColumns(ctx, conn)
}

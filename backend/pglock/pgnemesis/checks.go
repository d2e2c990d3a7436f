package pgnemesis

import (
	"context"
	"fmt"
	"strconv"
)

// lockRows selects the run lock's entries in pg_locks in the run's database
// (holders and waiters), with their sessions' application_name and state.
const lockRows = "SELECT l.pid, l.granted, coalesce(a.application_name, ''), coalesce(a.state, '') " +
	"FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid " +
	"WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()) " +
	"AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 1 ORDER BY l.granted DESC, l.pid"

// locks lists the run lock's entries in pg_locks.
func (t *Target) locks(ctx context.Context) ([]string, error) {
	t.mu.Lock()
	key := uint64(t.key)
	t.mu.Unlock()
	rows, err := t.db.QueryContext(ctx, lockRows, strconv.FormatUint(key>>32, 10), strconv.FormatUint(key&0xffffffff, 10))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var pid int
		var granted bool
		var app, state string
		if err := rows.Scan(&pid, &granted, &app, &state); err != nil {
			return nil, err
		}
		what := "waited for"
		if granted {
			what = "held"
		}
		out = append(out, fmt.Sprintf("advisory lock %s by backend %d (%s, %s)", what, pid, app, state))
	}
	return out, rows.Err()
}

// Leftovers implements nemesis.Target: the run lock's entries in pg_locks
// (held or waited for) and the clients' server sessions still open. The
// token table's row is no leftover: it must outlive every run (tokens keep
// growing only while it is there), one small row per lock name.
func (t *Target) Leftovers(ctx context.Context) ([]string, error) {
	out, err := t.locks(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := t.db.QueryContext(ctx, "SELECT pid, application_name, coalesce(state, '') FROM pg_catalog.pg_stat_activity "+
		"WHERE application_name LIKE $1 ORDER BY pid", appPrefix+"%")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var app, state string
		if err := rows.Scan(&pid, &app, &state); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("server session %d of %s still open (%s)", pid, app, state))
	}
	return out, rows.Err()
}

// Diagnose implements nemesis.Target: who holds and waits for the run's
// lock.
func (t *Target) Diagnose(ctx context.Context) []string {
	out, err := t.locks(ctx)
	if err != nil {
		return []string{"pg_locks: " + err.Error()}
	}
	if len(out) == 0 {
		return []string{"nobody holds or waits for the run's advisory lock"}
	}
	return out
}

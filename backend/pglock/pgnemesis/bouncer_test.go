package pgnemesis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// pglockParams are the session parameters every pglock connection sends in
// its startup message, which PgBouncer refuses unless told to ignore them
// (and then does not pass on to the server).
var pglockParams = []string{"idle_session_timeout", "idle_in_transaction_session_timeout",
	"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout",
	"client_connection_check_interval", "statement_timeout", "lock_timeout", "synchronous_commit"}

// checkBouncerRefused is why the nemesis has no PgBouncer variant: pglock
// refuses PgBouncer in session mode too (pglock.ErrPooler at Connect),
// since PgBouncer announces a backend key of its own. Were it let through,
// the server's bound would be gone as well: PgBouncer drops the ignored
// startup parameters (idle_session_timeout among them) instead of passing
// them on, so a cut-off holder's lock would stay until PgBouncer dropped
// its client.
func checkBouncerRefused(t *testing.T, dsn string) {
	t.Helper()
	b := pgtest.StartBouncer(t, dsn, "session", pglockParams...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pglock.Connect(ctx, b.DSN())
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, pglock.ErrPooler) {
		t.Errorf("pglock.Connect through PgBouncer in session mode: %v, want pglock.ErrPooler", err)
	}
}

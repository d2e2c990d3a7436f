package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The fault primitives of a started server, for the PostgreSQL nemesis
// (backend/pglock/pgnemesis) and tests of what a client sees: sessions
// ended by an administrator (Terminate), the whole server frozen
// (Pause/Resume), and a restart with downtime (RestartAfter).

// Terminate ends every server session whose application_name is app (other
// than its own), as an administrator would, with pg_terminate_backend, and
// waits up to timeout for each to be gone: an advisory lock the session held
// is free when Terminate returns it as ended. It returns the pids of the
// sessions it ended; a session that ended by itself meanwhile is not
// counted. It needs a superuser, or the sessions' own role (as PG_TEST_DSN's
// may be). The error is the first statement's that failed (the server
// unreachable, a timeout: then some sessions may have been ended).
func (s *Server) Terminate(ctx context.Context, app string, timeout time.Duration) ([]int, error) {
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// One statement: list and terminate together, so that no session of
	// app that existed when it began is missed (a session that starts
	// later is not ended). pg_terminate_backend(pid, timeout) waits for
	// the backend to exit; false means it had gone already or did not exit
	// in time (with a warning), which the wait below tells apart.
	rows, err := db.QueryContext(ctx, "SELECT pid, pg_catalog.pg_terminate_backend(pid, $2::int8) FROM pg_catalog.pg_stat_activity "+
		"WHERE application_name = $1 AND pid <> pg_catalog.pg_backend_pid()", app, timeout.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("pgtest: terminating the sessions of %q: %w", app, err)
	}
	defer rows.Close()
	var ended []int
	for rows.Next() {
		var pid int
		var ok bool
		if err := rows.Scan(&pid, &ok); err != nil {
			return ended, err
		}
		if ok {
			ended = append(ended, pid)
		}
	}
	if err := rows.Err(); err != nil {
		return ended, fmt.Errorf("pgtest: terminating the sessions of %q: %w", app, err)
	}
	return ended, nil
}

// Sessions returns the pids of the server sessions whose application_name
// is app.
func (s *Server) Sessions(ctx context.Context, app string) ([]int, error) {
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT pid FROM pg_catalog.pg_stat_activity WHERE application_name = $1 ORDER BY pid", app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, rows.Err()
}

// Pause freezes the whole server with SIGSTOP, as a hung host or a frozen
// VM would: the postmaster first (so that it forks no new process), then
// every process it forked: the backend of each client session, which is
// where statements, pings and lock grants are served (the lock manager is
// shared memory that the backends work on), and the auxiliary processes
// (WAL writer, checkpointer, ...). Stopping the postmaster alone would
// pause nothing a connected client uses: it only accepts new connections
// and forks their backends, and each backend is a process group of its own
// (PostgreSQL's children call setsid), so a signal to the postmaster's
// group does not reach them either. New connections wait in the listen
// backlog meanwhile; bytes sent to a session wait in its socket buffer
// (the kernel still acknowledges them). Pause returns once every process is
// stopped. Resume undoes it; Close and RestartAfter resume first.
func (s *Server) Pause() error {
	if s.cmd == nil {
		return errors.New("pgtest: Pause needs a server started by pgtest, not " + EnvDSN)
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.paused != nil {
		return nil
	}
	pm := s.cmd.Process.Pid
	if err := stopAndWait(pm); err != nil {
		syscall.Kill(pm, syscall.SIGCONT)
		return err
	}
	s.paused = []int{pm}
	kids, err := children(pm)
	for _, k := range kids {
		if e := stopAndWait(k); e != nil && !errors.Is(e, syscall.ESRCH) {
			err = errors.Join(err, e)
			continue
		}
		s.paused = append(s.paused, k)
	}
	if err != nil {
		s.resumeLocked()
		return fmt.Errorf("pgtest: pausing the server: %w", err)
	}
	return nil
}

// Resume continues a server Pause froze (SIGCONT to its processes, the
// postmaster last). It does nothing if the server is not paused.
func (s *Server) Resume() error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	s.resumeLocked()
	return nil
}

func (s *Server) resumeLocked() {
	for i := len(s.paused) - 1; i >= 0; i-- {
		syscall.Kill(s.paused[i], syscall.SIGCONT)
	}
	s.paused = nil
}

// Paused reports the pids Pause stopped (the postmaster first), nil when
// the server runs.
func (s *Server) Paused() []int {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return append([]int(nil), s.paused...)
}

// RestartAfter is Restart with downtime: the server stays down for down
// (less if ctx ends first) before it starts again (connections are refused
// meanwhile). A paused server is resumed first. ctx bounds the downtime
// only: the start is always attempted to its end (a fault is undone even
// when its context ends), within the start timeout.
func (s *Server) RestartAfter(ctx context.Context, crash bool, down time.Duration) error {
	if s.cmd == nil {
		return errors.New("pgtest: Restart needs a server started by pgtest, not " + EnvDSN)
	}
	s.Resume()
	sig := syscall.SIGINT
	if crash {
		sig = syscall.SIGQUIT
	}
	s.cmd.Process.Signal(sig)
	s.awaitExit()
	if down > 0 {
		select {
		case <-time.After(down):
		case <-ctx.Done():
		}
	}
	return s.run(context.WithoutCancel(ctx))
}

// awaitExit waits for the postmaster to exit (SIGKILL to its group after
// 10 s).
func (s *Server) awaitExit() {
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exit
	}
}

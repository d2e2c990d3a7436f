package pgnemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// The target's fault kinds.
const (
	FaultTerminate        = "terminate-backend" // pg_terminate_backend of every session of one client
	FaultRestartFast      = "restart-fast"      // fast shutdown, down for d, start
	FaultRestartImmediate = "restart-immediate" // immediate shutdown (crash recovery at start), down for d, start
	FaultPauseServer      = "pause-server"      // SIGSTOP of the postmaster and every backend for 0.3 to 1.6 T
)

// terminateWait bounds pg_terminate_backend's wait for each backend to
// exit, and the fault's statements.
const terminateWait = 5 * time.Second

// Faults implements nemesis.Target.
func (t *Target) Faults() []nemesis.FaultKind {
	return []nemesis.FaultKind{
		{Name: FaultTerminate, Scope: nemesis.ScopeClient, Inject: t.terminate},
		{Name: FaultRestartFast, Scope: nemesis.ScopeServer, Inject: t.restart(false), Busy: t.isDown},
		{Name: FaultRestartImmediate, Scope: nemesis.ScopeServer, Inject: t.restart(true), Busy: t.isDown},
		{Name: FaultPauseServer, Scope: nemesis.ScopeServer, Inject: t.pause, Busy: t.isDown},
	}
}

func (t *Target) isDown() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down
}

// terminate ends every session of client f.Client (its holder's and its
// waiter's connections): an advisory lock dies with its session, so a
// holder's lease is revoked, and the holder hears of it at once unless its
// connection is cut off (then at its TTL/2 deadline). It is a revocation
// scoped to that client, certain when a session was ended. Below stays 0:
// a counter read before the termination misses a grant the client gets
// while it runs (seen: the leader run, seed 8, granted token 384 between
// the read and the termination, and it was not excused), and one read
// after could take in the client's next grant on a new session; without
// it the check takes every grant of the client asked for before the fault
// ended as possibly removed, and one granted before it began as removed.
func (t *Target) terminate(ctx context.Context, f *nemesis.Fault, _ time.Duration, _ *rand.Rand) {
	app := appName(f.Client)
	f.Target = "client " + strconv.Itoa(f.Client) + " sessions"
	tctx, cancel := context.WithTimeout(ctx, 2*terminateWait)
	defer cancel()
	pids, err := t.srv.Terminate(tctx, app, terminateWait)
	f.Target += fmt.Sprintf(" %v", pids)
	switch {
	case err != nil:
		f.Err, f.Revokes = err.Error(), true // some may have been ended
	case len(pids) > 0:
		f.Revokes, f.Certain = true, true
	}
}

// restart stops the server (a fast or an immediate shutdown), keeps it
// down for d, and starts it again. Every session ends, so every lease is
// revoked: a holder hears of it at once unless its connection is cut off.
// A server that does not start again is left down for Heal (Busy).
func (t *Target) restart(crash bool) func(context.Context, *nemesis.Fault, time.Duration, *rand.Rand) {
	return func(ctx context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
		f.Target = "server"
		err := t.srv.RestartAfter(ctx, crash, d)
		// The shutdown ended every session, whatever the start did: every
		// grant asked for before the fault ended may be gone, every one
		// granted before it began is (Below 0, as for terminate).
		f.Revokes, f.Certain = true, true
		if err != nil {
			f.Err = err.Error()
			t.mu.Lock()
			t.down = true
			t.mu.Unlock()
		}
	}
}

// pause freezes the whole server for 0.3 to 1.6 T (drawn from rng; d is
// not used: the pause must be able to outlast the holder's TTL/2), then
// continues it. Not a revocation: no session ends while frozen, and at the
// continue the server's idle_session_timeout ends only sessions silent for
// T, whose holders gave up at T/2.
func (t *Target) pause(ctx context.Context, f *nemesis.Fault, _ time.Duration, rng *rand.Rand) {
	d := t.ttl*3/10 + time.Duration(rng.Int64N(int64(t.ttl*13/10)))
	f.Target = "server for " + d.Round(time.Millisecond).String()
	if err := t.srv.Pause(); err != nil {
		f.Err = err.Error()
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	t.srv.Resume()
}

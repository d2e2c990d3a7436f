package redisnemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// Fault kinds of the Redis target (the engine adds its generic client
// faults: cut, blackhole, latency, pause of a client).
const (
	FaultKillServer  = "kill-server"  // SIGKILL (half the time right after BGREWRITEAOF), restart on the same directory after d
	FaultPauseServer = "pause-server" // SIGSTOP, SIGCONT after d
	FaultSleepServer = "sleep-server" // DEBUG SLEEP d: the server busy in one command
	FaultClientKill  = "client-kill"  // CLIENT KILL of every connection of one client, pub/sub included
	FaultDeleteKey   = "delete-key"   // an operator's DEL of a lock's key: a revocation
)

// maxSleep bounds a DEBUG SLEEP, which can't be cut short.
const maxSleep = 10 * time.Second

// Faults lists the target's fault kinds: kill-server, pause-server,
// sleep-server (one server fault at a time, none while a failed restart
// left the server down), client-kill and delete-key.
func (t *Target) Faults() []nemesis.FaultKind {
	busy := func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.down || t.paused
	}
	// A killed server can't be told anything: client-kill and delete-key
	// wait for its restart rather than fail.
	killed := func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.down || t.killed
	}
	return []nemesis.FaultKind{
		{Name: FaultKillServer, Scope: nemesis.ScopeServer, Inject: t.injectKill, Busy: busy},
		{Name: FaultPauseServer, Scope: nemesis.ScopeServer, Inject: t.injectPause, Busy: busy},
		{Name: FaultSleepServer, Scope: nemesis.ScopeServer, Inject: t.injectSleep, Busy: busy},
		{Name: FaultClientKill, Scope: nemesis.ScopeClient, Inject: t.injectClientKill, Busy: killed},
		{Name: FaultDeleteKey, Scope: nemesis.ScopeStore, Inject: t.injectDeleteKey, Busy: killed},
	}
}

// injectKill kills the server with SIGKILL (a crash: only what the AOF
// fsynced survives, which with appendfsync always is every answered
// write) and restarts it on the same port and directory after d.
func (t *Target) injectKill(ctx context.Context, f *nemesis.Fault, d time.Duration, rng *rand.Rand) {
	f.Target = "server " + t.srv.Addr()
	var errs []error
	if rng.IntN(2) == 0 {
		// Half the kills come right after BGREWRITEAOF: if the forked
		// child still runs it dies with the server, and the restart
		// loads the previous files plus what was appended meanwhile.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := t.admin.BgRewriteAOF(rctx).Err(); err == nil {
			f.Target += " after BGREWRITEAOF"
		}
		cancel()
	}
	t.setState(&t.killed, true)
	defer t.setState(&t.killed, false)
	if err := t.srv.Kill(); err != nil {
		errs = append(errs, err)
	}
	_ = loop.Sleep(ctx, d)
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := t.srv.Restart(rctx); err != nil {
		errs = append(errs, err)
		t.setState(&t.down, true) // Heal tries again
	}
	if err := errors.Join(errs...); err != nil {
		f.Err = err.Error()
	}
}

// injectPause freezes the server (SIGSTOP) for d: clients' requests queue
// in the kernel and run, late, after SIGCONT, and keys whose expiry passed
// meanwhile expire then.
func (t *Target) injectPause(ctx context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
	f.Target = "server " + t.srv.Addr()
	if err := t.srv.Pause(); err != nil {
		f.Err = err.Error()
		return
	}
	t.setState(&t.paused, true)
	_ = loop.Sleep(ctx, d)
	if err := t.srv.Resume(); err != nil {
		f.Err = err.Error() // Heal tries again
		return
	}
	t.setState(&t.paused, false)
}

// injectSleep keeps the server busy in DEBUG SLEEP for d (at most
// maxSleep; it can't be cut short when ctx ends): it reads nothing else
// meanwhile, its clock runs on.
func (t *Target) injectSleep(_ context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
	f.Target = "server " + t.srv.Addr()
	if err := t.srv.Sleep(context.Background(), min(d, maxSleep)); err != nil {
		f.Err = err.Error()
	}
}

// injectClientKill makes the server close every connection of client
// f.Client: its pooled ones and its waiters' pub/sub connection.
func (t *Target) injectClientKill(ctx context.Context, f *nemesis.Fault, _ time.Duration, _ *rand.Rand) {
	n, err := t.srv.KillClients(ctx, t.clientName(f.Client))
	f.Target = fmt.Sprintf("client %d (%d connections)", f.Client, n)
	if err != nil {
		f.Err = err.Error()
	}
}

// deleteLua deletes a lock's holder key and reads its token counter in the
// same step: every grant of the lock so far has a token at most the
// counter, and none of them holds the key any more.
var deleteLua = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local n = redis.call('DEL', KEYS[1])
local c = redis.call('GET', KEYS[2])
return {n, c or '0', v or ''}`)

// injectDeleteKey is an operator's DEL of the holder key of one of the
// run's locks (drawn with rng): the holder's lease is revoked behind its
// back and it learns at its next renewal, up to T/3 later. A completed
// delete is certain, and Below is the counter plus one.
func (t *Target) injectDeleteKey(ctx context.Context, f *nemesis.Fault, _ time.Duration, rng *rand.Rand) {
	t.mu.Lock()
	names := make([]string, 0, len(t.locks))
	for n := range t.locks {
		names = append(names, n)
	}
	slices.Sort(names)
	var k lockKeys
	if len(names) > 0 {
		k = t.locks[names[rng.IntN(len(names))]]
	}
	t.mu.Unlock()
	if k.holder == "" {
		f.Target, f.Err = "no lock", "no lock asked for yet"
		return
	}
	f.Target = "key " + k.holder
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var res []any
	var err error
	for range 3 {
		// Again after a connection error (the admin's pooled connection
		// died with a killed server): whatever an earlier attempt did, the
		// last one's counter is above every grant it could have removed.
		if res, err = deleteLua.Run(dctx, t.admin, []string{k.holder, k.token}).Slice(); err == nil || !uncertain(err) || dctx.Err() != nil {
			break
		}
		f.Revokes = true // that attempt may have run, or may run late (a paused server)
	}
	if err != nil {
		f.Err = err.Error()
		f.Revokes = f.Revokes || uncertain(err)
		return
	}
	n, _ := res[0].(int64)
	counter, _ := res[1].(string)
	held, _ := res[2].(string)
	switch {
	case n == 0 && !f.Revokes:
		f.Target += " (free)"
		return
	case n == 0: // an earlier attempt may have deleted it
		f.Target += " (free at the last attempt)"
	case strings.HasPrefix(held, "next:"):
		f.Target += " (handed off)"
	}
	var c uint64
	if _, err := fmt.Sscan(counter, &c); err != nil {
		f.Revokes, f.Err = true, "token counter "+counter+": "+err.Error()
		return
	}
	f.Revokes, f.Certain, f.Below = true, true, fence.Token(c+1)
}

// uncertain reports whether a request that failed with err may have run:
// not when the server refused it (an error reply) or the dial was refused.
func uncertain(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, syscall.ECONNREFUSED)
}

package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A restart of the server (killed, then started on its data) keeps the
// revision counter, so tokens keep growing; the Sessions reconnect by
// themselves; a holder either keeps its lease (keep-alives resumed in time)
// or sees its context end, and the lock is never granted while it holds.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t) // its own: the shared one must not be restarted
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func() *etcdlock.Mutex {
		s, err := etcdlock.Connect(ctx, srv.URL("/restart"), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return mutex(t, s, "lock")
	}
	a, b := connect(), connect()
	la, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := la.Token()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// a waits for the lock; b's lease may have survived the restart.
	acquired := acquireAsync(ctx, a)
	holderDone := lb.Context().Done()
	survived := time.After(testTTL) // a context still live then had keep-alives acknowledged after the restart
	var got recipe.Lease
	for got == nil {
		select {
		case r := <-acquired:
			if errors.Is(r.err, recipe.ErrSessionLost) {
				acquired = acquireAsync(ctx, a) // a's lease was lost in the restart: a new one is granted
				continue
			}
			if r.err != nil {
				t.Fatalf("Acquire after the restart: %v", r.err)
			}
			if cause := context.Cause(lb.Context()); cause == nil {
				t.Fatalf("granted while the holder's lease context is live")
			}
			got = r.lease
		case <-holderDone:
			t.Logf("the holder's lease ended in the restart: %v", context.Cause(lb.Context()))
			holderDone, survived = nil, nil
		case <-survived:
			t.Logf("the holder's lease survived the restart")
			holderDone, survived = nil, nil
			if err := lb.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got.Token() <= lb.Token() || lb.Token() <= before {
		t.Errorf("tokens %v, %v, then %v after the restart: not growing", before, lb.Token(), got.Token())
	}
	if err := got.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

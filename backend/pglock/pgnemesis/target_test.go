package pgnemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// kind returns t's fault kind named name.
func kind(t *testing.T, tg *Target, name string) nemesis.FaultKind {
	t.Helper()
	for _, k := range tg.Faults() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no fault kind %q", name)
	return nemesis.FaultKind{}
}

// checkPrimitives drives each fault kind of the target once by hand,
// on two clients contending for the run's lock: terminate-backend ends the
// holder's session alone (its lease ends at once, the waiter is granted)
// and reports a certain revocation of that client (Below unknown: the check
// then takes its grants asked before the fault ended); both restarts end every lease; a
// pause outlasting TTL/2 suspends the holder; the register refuses a stale
// token; nothing is left once the clients closed.
func checkPrimitives(t *testing.T, tg *Target) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const base = "/nemesis/prims"
	if err := tg.Prepare(ctx, base); err != nil {
		t.Fatal(err)
	}
	var locks [2]recipe.Lock
	for i := range locks {
		p := serverkit.NewFaultProxy()
		defer p.Close()
		c, err := tg.Connect(ctx, i, p)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if locks[i], err = c.Lock(base + "/lock"); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	inject := func(name string, client int, d time.Duration) nemesis.Fault {
		f := nemesis.Fault{Kind: name, Client: client}
		kind(t, tg, name).Inject(ctx, &f, d, rng)
		if f.Err != "" {
			t.Fatalf("%s: %s", name, f.Err)
		}
		return f
	}

	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan recipe.Lease, 1)
	go func() {
		l, err := locks[1].Acquire(ctx)
		if err != nil {
			t.Errorf("the waiter's Acquire: %v", err)
		}
		waiter <- l
	}()
	for n := 0; n < 2; {
		time.Sleep(10 * time.Millisecond)
		l, _ := tg.locks(ctx)
		n = len(l)
	}
	if f := inject(FaultTerminate, 0, 0); !f.Revokes || !f.Certain || f.Below != 0 {
		t.Errorf("terminate-backend of the holder: %+v; want a certain revocation (Below unknown)", f)
	}
	if !errors.Is(context.Cause(a.Context()), recipe.ErrSessionLost) {
		t.Errorf("the terminated holder's lease: %v, want ErrSessionLost at once", context.Cause(a.Context()))
	}
	b := <-waiter
	if b == nil {
		t.FailNow()
	}
	if f := inject(FaultTerminate, 0, 0); f.Revokes || b.Context().Err() != nil {
		t.Errorf("terminate-backend of a client without a session: %+v, the other's lease %v", f, context.Cause(b.Context()))
	}

	for _, name := range []string{FaultRestartFast, FaultRestartImmediate} {
		f := inject(name, -1, 300*time.Millisecond)
		if !f.Revokes || !f.Certain || f.Below != 0 {
			t.Errorf("%s: %+v, want a certain revocation (Below unknown)", name, f)
		}
		if !errors.Is(context.Cause(b.Context()), recipe.ErrSessionLost) {
			t.Errorf("%s: the holder's lease: %v, want ErrSessionLost", name, context.Cause(b.Context()))
		}
		old := b.Token()
		if b, err = locks[1].Acquire(ctx); err != nil {
			t.Fatalf("Acquire after %s: %v", name, err)
		}
		if b.Token() <= old {
			t.Errorf("token %v after %s, not above %v", b.Token(), name, old)
		}
	}

	for b.Context().Err() == nil { // a pause of 0.3 to 1.6 TTL: some outlast TTL/2
		if f := inject(FaultPauseServer, -1, 0); f.Revokes {
			t.Errorf("pause-server is no revocation: %+v", f)
		}
	}
	if !errors.Is(context.Cause(b.Context()), recipe.ErrSuspended) {
		t.Errorf("a holder whose server froze: %v, want ErrSuspended", context.Cause(b.Context()))
	}
	b.Release(ctx)
	if err := tg.Heal(ctx); err != nil {
		t.Fatal(err)
	}

	reg := tg.Registers()[0]
	if _, seq, err := reg.Write(ctx, 0, 7, "x", func() {}); err != nil || seq != 1 {
		t.Errorf("register write with token 7: seq %d, %v", seq, err)
	}
	if prev, _, err := reg.Write(ctx, 1, 6, "y", func() { t.Error("a stale write ran") }); !errors.Is(err, fence.ErrStale) {
		t.Errorf("register write with token 6 after 7: prev %v, %v; want fence.ErrStale", prev, err)
	}
	a.Release(ctx)
}

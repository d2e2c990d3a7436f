package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// heldBy is the state of a lock held by id with token tok.
func heldBy(id string, tok fence.Token) recipe.HolderState {
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: id, Token: tok}}
}

// holderNow reads m's holder, failing the test on an error.
func holderNow(t *testing.T, m *etcdlock.Mutex) recipe.HolderState {
	t.Helper()
	st, err := m.Holder(opCtx(t))
	if err != nil {
		t.Fatalf("Holder: %v", err)
	}
	return st
}

// nextState takes the next state from ch, failing the test if none comes within
// 10 s or ch closes.
func nextState(t *testing.T, ch <-chan recipe.HolderState) recipe.HolderState {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("ObserveHolder's channel closed")
		}
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no state from ObserveHolder within 10 s")
	}
	panic("unreachable")
}

// expectState takes the next state from ch and fails the test unless it is want.
func expectState(t *testing.T, ch <-chan recipe.HolderState, want recipe.HolderState) {
	t.Helper()
	if got := nextState(t, ch); got != want {
		t.Fatalf("ObserveHolder delivered %v (%+v), want %v (%+v)", got, got, want, want)
	}
}

// closed waits for ch to close, taking what it still delivers.
func closed(t *testing.T, ch <-chan recipe.HolderState, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("ObserveHolder's channel still open 10 s after %s", what)
		}
	}
}

// Holder reads a free lock, its holder (the ID its Session published, the
// Lease's token, no Since: etcd keeps no clock), and the lock free again
// after Release; without WithIdentity the ID is "<hostname>:<pid>".
func TestHolderReadsTheHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, etcdlock.WithIdentity("worker-1"))
	m := mutex(t, s, "holder/read")
	if st := holderNow(t, m); st != (recipe.HolderState{}) {
		t.Fatalf("Holder of a free lock: %+v, want the zero state", st)
	}
	l, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st := holderNow(t, m); st != heldBy("worker-1", l.Token()) || !st.Holder.Since.IsZero() {
		t.Fatalf("Holder of a held lock: %+v, want %+v", st, heldBy("worker-1", l.Token()))
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if st := holderNow(t, m); st.Held {
		t.Fatalf("Holder after Release: %v", st)
	}

	other, _ := e.connect(t)
	host, _ := os.Hostname()
	if want := fmt.Sprintf("%s:%d", host, os.Getpid()); other.Identity() != want {
		t.Errorf("default Identity %q, want %q", other.Identity(), want)
	}
	l2, err := mutex(t, other, "holder/read").TryAcquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(context.Background())
	if st := holderNow(t, m); st != heldBy(other.Identity(), l2.Token()) {
		t.Errorf("Holder: %+v, want %+v", st, heldBy(other.Identity(), l2.Token()))
	}
}

// WithIdentity refuses what is no identity before connecting.
func TestWithIdentityRefusesBadIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"", "a\nb", "a\x00", "\xff", strings.Repeat("x", etcdlock.MaxIdentityLen+1)} {
		s, err := etcdlock.Connect(opCtx(t), e.srv.URL(e.prefix), append(e.opts, etcdlock.WithIdentity(id))...)
		if !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithIdentity(%q): %v, want recipe.ErrBadOption", id, err)
		}
		if s != nil {
			s.Close()
		}
	}
}

// ObserveHolder follows three successive holders in order, with growing
// tokens, through hand-offs with a waiter in line (never "free" between),
// and the lock's end free.
func TestObserveHolderFollowsHolders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "holder/follow"
	obs, _ := e.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := mutex(t, obs, name).ObserveHolder(ctx)
	expectState(t, ch, recipe.HolderState{})

	var locks []*etcdlock.Mutex
	for _, id := range []string{"a", "b", "c"} {
		s, _ := e.connect(t, etcdlock.WithIdentity(id))
		locks = append(locks, mutex(t, s, name))
	}
	l, err := locks[0].Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	expectState(t, ch, heldBy("a", l.Token()))
	for i, id := range []string{"b", "c"} {
		waiting := acquireAsync(opCtx(t), locks[i+1])
		serverkit.Eventually(t, 10*time.Second, id+"'s key put", func() bool {
			n, err := e.keys(opCtx(t), name)
			return err == nil && n == 2
		})
		prev := l.Token()
		if err := l.Release(opCtx(t)); err != nil {
			t.Fatal(err)
		}
		r := <-waiting
		if r.err != nil {
			t.Fatal(r.err)
		}
		l = r.lease
		if l.Token() <= prev {
			t.Fatalf("token %v after %v", l.Token(), prev)
		}
		expectState(t, ch, heldBy(id, l.Token()))
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	expectState(t, ch, recipe.HolderState{})
}

// An observer started while the lock is held delivers the holder at once;
// cancelling its ctx closes the channel and leaves no goroutine (its
// watches included). Not parallel: goleak sees every goroutine.
func TestObserveHolderStartedWhileHeld(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t, etcdlock.WithIdentity("holder"))
	m := mutex(t, s, "holder/started")
	l, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	holderNow(t, m) // the client's connections are up
	before := goleak.IgnoreCurrent()

	ctx, cancel := context.WithCancel(context.Background())
	ch := m.ObserveHolder(ctx)
	expectState(t, ch, heldBy("holder", l.Token()))
	cancel()
	closed(t, ch, "ctx's end")
	// The client may dial again meanwhile (grpc's transport goroutines, not
	// the observer's): the package's TestMain checks those at the end.
	goleak.VerifyNone(t, before,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/transport.NewHTTP2Client.func6"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/transport.(*http2Client).reader"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/transport.(*http2Client).keepalive"))
}

// Closing the Session closes the channel of its observers.
func TestObserveHolderEndsWithSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	ch := mutex(t, s, "holder/close").ObserveHolder(context.Background())
	expectState(t, ch, recipe.HolderState{})
	s.Close()
	closed(t, ch, "Session.Close")
	if _, err := mutex(t, s, "holder/close").Holder(opCtx(t)); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Holder after Close: %v, want recipe.ErrSessionClosed", err)
	}
}

// An observer whose connections are cut reads again and goes on: the
// holder granted meanwhile is delivered.
func TestObserveHolderSurvivesACut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	obs, p := e.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := mutex(t, obs, "holder/cut").ObserveHolder(ctx)
	expectState(t, ch, recipe.HolderState{})
	p.Cut()
	s, _ := e.connect(t, etcdlock.WithIdentity("during"))
	l, err := mutex(t, s, "holder/cut").Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	p.Resume()
	expectState(t, ch, heldBy("during", l.Token()))
}

// Proclaim changes the published ID of a live grant, keeping its token and
// etcd lease; observers see it. It refuses a bad ID, and a Lease that is
// released, of another lock, or whose key another client deleted.
func TestProclaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, etcdlock.WithIdentity("before"))
	m := mutex(t, s, "holder/proclaim")
	l, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := m.ObserveHolder(ctx)
	expectState(t, ch, heldBy("before", l.Token()))
	if err := m.Proclaim(opCtx(t), l, "after"); err != nil {
		t.Fatal(err)
	}
	expectState(t, ch, heldBy("after", l.Token()))
	resp, err := e.in.Get(opCtx(t), e.prefix+"/holder/proclaim/_lock_", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.ID() || string(resp.Kvs[0].Value) != "after" {
		t.Fatalf("the key after Proclaim: %v, %v; want the value \"after\" under lease %x", resp, err, s.ID())
	}
	if l.Context().Err() != nil {
		t.Fatalf("Proclaim ended the Lease: %v", context.Cause(l.Context()))
	}
	if err := m.Proclaim(opCtx(t), l, "a\tb"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Proclaim of a bad ID: %v, want recipe.ErrBadOption", err)
	}
	if err := mutex(t, s, "holder/other").Proclaim(opCtx(t), l, "x"); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Proclaim on another lock: %v, want recipe.ErrLeaseLost", err)
	}
	if err := m.Proclaim(opCtx(t), nil, "x"); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Proclaim of a nil Lease: %v, want recipe.ErrLeaseLost", err)
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := m.Proclaim(opCtx(t), l, "x"); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Proclaim after Release: %v, want recipe.ErrLeaseLost", err)
	}
	expectState(t, ch, recipe.HolderState{})

	l2, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/holder/proclaim/_lock_", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if err := m.Proclaim(opCtx(t), l2, "x"); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Proclaim of a deleted grant: %v, want recipe.ErrLeaseLost", err)
	}
}

// Another client's malformed key in the lock's range (an identity with a
// control character, invalid UTF-8, too long) is reported as held by its
// token with an empty ID and ErrBadHolder, by Holder and ObserveHolder,
// which goes on: the lock's next states are delivered.
func TestHolderMalformedIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, etcdlock.WithIdentity("honest"))
	m := mutex(t, s, "holder/hostile")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := m.ObserveHolder(ctx)
	expectState(t, ch, recipe.HolderState{})
	dir := e.prefix + "/holder/hostile/_lock_"
	for _, v := range []string{"bad\x1b[31m", "\xff\xfe", strings.Repeat("y", etcdlock.MaxIdentityLen+1)} {
		resp, err := e.in.Put(opCtx(t), dir+"hostile", v)
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.Holder(opCtx(t))
		tok := fence.Token(resp.Header.Revision)
		if !errors.Is(err, etcdlock.ErrBadHolder) || st != heldBy("", tok) || strings.Contains(err.Error(), v) {
			t.Errorf("Holder with the value %q: %+v, %v; want %+v and ErrBadHolder, without the value", v, st, err, heldBy("", tok))
		}
		expectState(t, ch, heldBy("", tok))
		if _, err := e.in.Delete(opCtx(t), dir+"hostile"); err != nil {
			t.Fatal(err)
		}
		expectState(t, ch, recipe.HolderState{})
	}
	l, err := m.TryAcquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	expectState(t, ch, heldBy("honest", l.Token()))
}

// With WithLockDelay, a first key holds only once the lock-delay's record
// names it: a contender serving a delay (the record names a holder gone)
// is shown as no holder, by Holder and ObserveHolder.
func TestHolderLockDelayRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	m, err := etcdlock.New(s, "holder/delay", etcdlock.WithLockDelay(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := m.ObserveHolder(ctx)
	expectState(t, ch, recipe.HolderState{})
	base := e.prefix + "/holder/delay/"
	key := base + "_lock_" + strings.Repeat("0", 32)
	resp, err := e.in.Txn(opCtx(t)).Then(clientv3.OpPut(base+"_lockdelay_held", base+"_lock_gone"), clientv3.OpPut(key, "serving")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if st := holderNow(t, m); st.Held {
		t.Errorf("Holder while the first key serves a delay: %v, want free", st)
	}
	if _, err := e.in.Put(opCtx(t), base+"_lockdelay_held", key); err != nil {
		t.Fatal(err)
	}
	want := heldBy("serving", fence.Token(resp.Header.Revision))
	if st := holderNow(t, m); st != want {
		t.Errorf("Holder once recorded: %v, want %v", st, want)
	}
	expectState(t, ch, want)
	if _, err := e.in.Delete(opCtx(t), base, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	expectState(t, ch, recipe.HolderState{})
}

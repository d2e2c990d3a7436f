package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// pollFast is the interval of the tests' observers.
const pollFast = 20 * time.Millisecond

// holderOf reads m's holder, failing the test on an error.
func holderOf(t *testing.T, m *redislock.Mutex) recipe.HolderState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := m.Holder(ctx)
	if err != nil {
		t.Fatalf("Holder: %v", err)
	}
	return st
}

func held(id string, token fence.Token) recipe.HolderState {
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: id, Token: token}}
}

// follower reads an observer's channel and checks every state it gets
// against the contract: consecutive states differ, tokens never go back.
type follower struct {
	t    *testing.T
	ch   <-chan recipe.HolderState
	seen []recipe.HolderState
}

// await reads states until want, failing if the channel closes or 20 s
// pass (a bound for a broken observer, not a speed check).
func (f *follower) await(want recipe.HolderState) {
	f.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case st, ok := <-f.ch:
			if !ok {
				f.t.Fatalf("the channel closed while waiting for %v (seen %v)", want, f.seen)
			}
			if n := len(f.seen); n > 0 && f.seen[n-1] == st {
				f.t.Errorf("%v delivered twice in a row", st)
			}
			if st.Held {
				for _, old := range f.seen {
					if old.Held && old.Holder.Token > st.Holder.Token {
						f.t.Errorf("token went back: %v after %v", st, old)
					}
				}
			}
			f.seen = append(f.seen, st)
			if st == want {
				return
			}
		case <-timeout:
			f.t.Fatalf("no %v within 20 s (seen %v)", want, f.seen)
		}
	}
}

// closes waits for the channel to close, reading what is left.
func closes(t *testing.T, ch <-chan recipe.HolderState, what string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: the channel is still open after 20 s", what)
		}
	}
}

// Holder reads a free lock, a held one (the holder's identity and its
// lease's token, from another session), and a released one, with
// WithIdentity and with the default identity.
func TestHolderReadsTheServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	named := mustNew(t, connect(t, srv, nil, redislock.WithIdentity("worker-7")), "read")
	plain := mustNew(t, connect(t, srv, nil), "read")
	if st := holderOf(t, plain); st != (recipe.HolderState{}) {
		t.Fatalf("Holder of a lock never taken = %v, want free", st)
	}
	l := acquire(t, named)
	if st := holderOf(t, plain); st != held("worker-7", l.Token()) {
		t.Errorf("Holder while held = %+v, want worker-7 with token %v and a zero Since", st, l.Token())
	}
	release(t, l)
	if st := holderOf(t, plain); st.Held {
		t.Errorf("Holder after Release = %v, want free", st)
	}
	l2 := acquire(t, plain)
	if st := holderOf(t, named); st != held(redislock.DefaultIdentity(), l2.Token()) || l2.Token() <= l.Token() {
		t.Errorf("Holder = %v (second grant's token %v, first's %v), want %q with the second token",
			st, l2.Token(), l.Token(), redislock.DefaultIdentity())
	}
	release(t, l2)
}

// An observer follows three holders in turn, the second and third
// handed the lock by a release while they waited, and the final free
// lock: each holder with its lease's token, in order.
func TestObserveHolderFollowsHolders(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	obs := mustNew(t, connect(t, srv, nil, redislock.WithHolderPoll(pollFast)), "follow")
	var ms []*redislock.Mutex
	for _, id := range []string{"a", "b", "c"} {
		ms = append(ms, mustNew(t, connect(t, srv, nil, redislock.WithIdentity(id)), "follow"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &follower{t: t, ch: obs.ObserveHolder(ctx)}
	f.await(recipe.HolderState{})

	la := acquire(t, ms[0])
	got := make([]chan recipe.Lease, 2)
	for i, m := range ms[1:] { // b, then c, wait in the queue
		got[i] = make(chan recipe.Lease, 1)
		go func() {
			l, err := m.Acquire(ctx)
			if err != nil && ctx.Err() == nil {
				t.Errorf("%d: %v", i, err)
			}
			got[i] <- l
		}()
		waitQueued(t, rdb, obs, int64(i+1))
	}
	f.await(held("a", la.Token()))
	release(t, la)
	lb := <-got[0]
	if lb == nil {
		t.FailNow()
	}
	f.await(held("b", lb.Token()))
	release(t, lb)
	lc := <-got[1]
	if lc == nil {
		t.FailNow()
	}
	f.await(held("c", lc.Token()))
	release(t, lc)
	f.await(recipe.HolderState{})

	var order []string
	for _, st := range f.seen {
		if st.Held {
			order = append(order, st.Holder.ID)
		}
	}
	if strings.Join(order, ",") != "a,b,c" || !(la.Token() < lb.Token() && lb.Token() < lc.Token()) {
		t.Errorf("holders seen %v with tokens %v, %v, %v; want a, b, c with growing tokens", order, la.Token(), lb.Token(), lc.Token())
	}
	t.Logf("states seen: %v", f.seen)
}

// An observer started while the lock is held gets the holder at once; the
// Close of its Session closes the channel.
func TestObserveHolderStartedWhileHeldEndsAtClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := acquire(t, mustNew(t, connect(t, srv, nil, redislock.WithIdentity("early")), "late-observer"))
	s := connect(t, srv, nil, redislock.WithHolderPoll(pollFast))
	f := &follower{t: t, ch: mustNew(t, s, "late-observer").ObserveHolder(context.Background())}
	f.await(held("early", l.Token()))
	if len(f.seen) != 1 {
		t.Errorf("states before the holder: %v", f.seen)
	}
	s.Close()
	closes(t, f.ch, "after Close")
}

// Ending ctx closes the channel and leaves no goroutine behind. Not
// parallel: goleak compares with the goroutines before the observer.
func TestObserveHolderEndsWithCtx(t *testing.T) {
	srv := redistest.Start(t)
	m := mustNew(t, connect(t, srv, nil, redislock.WithHolderPoll(pollFast)), "cancel")
	holderOf(t, m) // the pool's connection
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{t: t, ch: m.ObserveHolder(ctx)}
	f.await(recipe.HolderState{})
	cancel()
	closes(t, f.ch, "after cancel")
	goleak.VerifyNone(t, before)

	s := connect(t, srv, nil)
	m = mustNew(t, s, "cancel")
	s.Close()
	closes(t, m.ObserveHolder(context.Background()), "observing on a closed session")
	if _, err := m.Holder(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Holder on a closed session = %v, want ErrSessionClosed", err)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := mustNew(t, connect(t, srv, nil), "cancel").Holder(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Holder with an ended ctx = %v, want its cause", err)
	}
}

// Another client's writes to the lock's keys: what this package never
// writes is a typed error for Holder, never a panic, and never delivered
// by an observer, which logs it without quoting the value, keeps the last
// state and goes on once the keys are sane again; a token counter that
// went back is not delivered. A hand-off ("next:" owner) is free.
func TestHolderHostileData(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var logs syncBuffer
	m := mustNew(t, connect(t, srv, nil, redislock.WithHolderPoll(pollFast),
		redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))), "hostile")
	ctx := context.Background()
	owner := redislock.NewOwner()
	rnd := owner[strings.LastIndexByte(owner, ':')+1:]
	set := func(holder, token string) { // in one transaction: an observer sees no step between
		t.Helper()
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, m.Key(), m.TokenKey())
			if holder != "" {
				p.Set(ctx, m.Key(), holder, 0)
			}
			if token != "" {
				p.Set(ctx, m.TokenKey(), token, 0)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	logged := func(what string) {
		t.Helper()
		for i := 0; !strings.Contains(logs.String(), what); i++ {
			if i > 1000 {
				t.Fatalf("no warning with %q in 20 s:\n%s", what, logs.String())
			}
			time.Sleep(pollFast)
		}
	}
	for _, c := range []struct {
		name, holder, token string
		setup               func(*redis.Client) error // instead of holder and token
	}{
		{name: "no separator", holder: "garbage", token: "5"},
		{name: "no identity", holder: ":" + rnd, token: "5"},
		{name: "short random part", holder: "web-1:ABC", token: "5"},
		{name: "control character", holder: "web\x00-1:" + rnd, token: "5"},
		{name: "invalid UTF-8", holder: "web\xff:" + rnd, token: "5"},
		{name: "huge", holder: strings.Repeat("x", 100000) + ":" + rnd, token: "5"},
		{name: "handed to garbage", holder: "next:garbage", token: "5"},
		{name: "no token", holder: owner},
		{name: "token zero", holder: owner, token: "0"},
		{name: "token negative", holder: owner, token: "-3"},
		{name: "token text", holder: owner, token: "five"},
		{name: "token past int64", holder: owner, token: "9223372036854775808"},
		{name: "lock key a list", setup: func(c *redis.Client) error { return c.LPush(ctx, m.Key(), owner).Err() }},
		{name: "token a hash", setup: func(c *redis.Client) error {
			if err := c.Set(ctx, m.Key(), owner, 0).Err(); err != nil {
				return err
			}
			return c.HSet(ctx, m.TokenKey(), "n", "5").Err()
		}},
	} {
		set(c.holder, c.token)
		if c.setup != nil {
			if err := c.setup(rdb); err != nil {
				t.Fatal(err)
			}
		}
		st, err := m.Holder(ctx)
		var op *recipe.OpError
		if !errors.Is(err, redislock.ErrBadData) || !errors.As(err, &op) {
			t.Errorf("%s: Holder = %v, %v; want a *recipe.OpError matching ErrBadData", c.name, st, err)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: an error of %d bytes: %.300s", c.name, len(err.Error()), err)
		}
	}
	set("next:"+owner, "5")
	if st := holderOf(t, m); st.Held {
		t.Errorf("a lock handed to a waiter = %v, want free", st)
	}
	set(owner, "7")
	if st := holderOf(t, m); st != held(redislock.DefaultIdentity(), 7) {
		t.Errorf("Holder = %v, want %q with token 7", st, redislock.DefaultIdentity())
	}

	obsCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &follower{t: t, ch: m.ObserveHolder(obsCtx)}
	f.await(held(redislock.DefaultIdentity(), 7))
	set("garbage-value", "8")
	logged("not an owner id")
	set("other:"+rnd, "3") // the counter went back: not delivered
	logged("went back")
	set("other:"+rnd, "9")
	f.await(held("other", 9))
	if len(f.seen) != 2 {
		t.Errorf("states seen: %v, want the holder with token 7, then with 9", f.seen)
	}
	if strings.Contains(logs.String(), "garbage-value") {
		t.Errorf("a stored value quoted in the log:\n%s", logs.String())
	}
}

// WithIdentity and WithHolderPoll refuse what the package could not
// write or read back; nothing is dialled then.
func TestHolderOptions(t *testing.T) {
	for name, opt := range map[string]redislock.Option{
		"empty identity":       redislock.WithIdentity(""),
		"identity with ':'":    redislock.WithIdentity("host:1"),
		"identity next":        redislock.WithIdentity("next"),
		"identity newline":     redislock.WithIdentity("a\nb"),
		"identity invalid":     redislock.WithIdentity("a\xff"),
		"identity too long":    redislock.WithIdentity(strings.Repeat("x", redislock.MaxIdentityLen+1)),
		"poll zero":            redislock.WithHolderPoll(0),
		"poll below the least": redislock.WithHolderPoll(redislock.MinHolderPoll - 1),
	} {
		if _, err := redislock.Connect(context.Background(), "redis://127.0.0.1:1", opt); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: Connect = %v, want an error matching recipe.ErrBadOption", name, err)
		}
	}
	for _, id := range []string{"worker-7", "nexthop", "web 1 (eu)", "πod-3", strings.Repeat("x", redislock.MaxIdentityLen)} {
		if _, err := redislock.Connect(context.Background(), "redis://", redislock.WithIdentity(id)); !errors.Is(err, redislock.ErrBadURL) {
			t.Errorf("WithIdentity(%q) refused: %v", id, err)
		}
	}
}

// The documented ACL line lets Holder read; a revoked GET is a
// *PermissionError naming it, the user's password in no error.
func TestHolderRights(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	m := mustNew(t, connectURL(t, aclUser(t, srv, "observer", ""), srv, redislock.WithIdentity("acl")), "rights")
	l := acquire(t, m)
	if st := holderOf(t, m); st != held("acl", l.Token()) {
		t.Errorf("Holder with the documented rights = %v, want acl with token %v", st, l.Token())
	}
	release(t, l)
	if err := srv.Client(t).Do(context.Background(), "ACL", "SETUSER", "observer", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := m.Holder(context.Background())
	var perr *redislock.PermissionError
	if !errors.As(err, &perr) || !errors.Is(err, recipe.ErrNoPermission) || !strings.Contains(perr.Right, "GET") {
		t.Errorf("Holder without GET = %v, want a *PermissionError naming GET", err)
	}
	if err != nil && strings.Contains(err.Error(), aclPassword) {
		t.Error("the error shows the password")
	}
}

package etcdlock_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Bad names are refused by New, before anything reaches the server.
func TestNewRefusesBadNames(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t)
	for _, n := range []string{"", "_lock_x", "a/_lock_", "a\x00b", "a\xffb", strings.Repeat("x", etcdlock.MaxNameLen+1)} {
		m, err := etcdlock.New(s, n)
		if err == nil {
			t.Errorf("New(%q) accepted", m.Name())
			continue
		}
		if !errors.Is(err, etcdlock.ErrInvalidName) || !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v, want an error matching ErrInvalidName and recipe.ErrInvalidPath", n, err)
		}
		if cerr := etcdlock.CheckName(n); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("CheckName(%q) = %v, want New's error %v", n, cerr, err)
		}
	}
	for _, n := range []string{"/jobs/nightly", "/", "a//b", "a/", "a\nb"} {
		if _, err := etcdlock.New(s, n); err != nil {
			t.Errorf("New(%q): %v", n, err)
		}
	}
	if _, err := etcdlock.New(nil, "a"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil, ...): %v, want recipe.ErrBadOption", err)
	}
}

// The key layout is <prefix>/<name>/_lock_<guid>; "/a" and "a" are one lock;
// "a" and "a/b" are two, and so are "a" and "a/" (only a leading "/" is
// dropped).
func TestKeysAndNames(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t)
	l, err := mutex(t, s, "/jobs/nightly").Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	resp, err := e.in.Get(opCtx(t), e.prefix+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys under the prefix: %v, %v", resp, err)
	}
	kv := resp.Kvs[0]
	if want := regexp.MustCompile("^" + regexp.QuoteMeta(e.prefix) + "/jobs/nightly/_lock_[0-9a-f]{32}$"); !want.Match(kv.Key) {
		t.Errorf("key %q, want %s", kv.Key, want)
	}
	if uint64(kv.CreateRevision) != uint64(l.Token()) || clientv3.LeaseID(kv.Lease) != s.ID() {
		t.Errorf("key created at %d under lease %x; token %v, session lease %x", kv.CreateRevision, kv.Lease, l.Token(), s.ID())
	}

	other, _ := e.connect(t)
	if _, err := mutex(t, other, "jobs/nightly").TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("TryAcquire of jobs/nightly while /jobs/nightly is held: %v, want recipe.ErrLocked", err)
	}
	for _, n := range []string{"jobs", "jobs/nightly/x", "jobs/nightly2", "jobs/nightly/", "jobs//nightly", "//jobs/nightly", "/", "jobs/"} {
		l2, err := mutex(t, other, n).TryAcquire(opCtx(t))
		if err != nil {
			t.Errorf("TryAcquire of %s while jobs/nightly is held: %v", n, err)
			continue
		}
		if err := l2.Release(opCtx(t)); err != nil {
			t.Error(err)
		}
	}
}

// C4: an Acquire cancelled while its put is in flight (the server
// unreachable) returns soon (when its lease ends, or the cleanup timeout);
// when the put gets through after all, its key is deleted (by the delete
// of the attempt, or with the lease, which the Session revokes once the
// server answers again), and the lock is not blocked.
func TestCancelledWhilePutInFlight(t *testing.T) {
	e := newEnv(t)
	holder, _ := e.connect(t)
	lh, err := mutex(t, holder, "in-flight").Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	s, p := e.connect(t)
	m := mutex(t, s, "in-flight")
	p.Blackhole()
	giveUp := errors.New("gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(giveUp) })
	start := time.Now()
	_, err = m.Acquire(ctx)
	if !errors.Is(err, giveUp) {
		t.Fatalf("Acquire cancelled in flight: %v, want the context's cause", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Acquire returned %v after its context was cancelled", d-200*time.Millisecond)
	}
	before, err := e.in.Get(opCtx(t), "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	p.Resume() // the put goes through now
	e.expectKeys(t, "in-flight", 1, "the holder's key only")

	// The history shows the late put and its delete.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	var puts, deletes int
	for wr := range e.in.Watch(wctx, e.prefix+"/in-flight/", clientv3.WithPrefix(), clientv3.WithRev(before.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				puts++
			} else {
				deletes++
			}
		}
		if puts > 0 && deletes >= puts {
			break
		}
	}
	if puts != deletes || puts > 1 {
		t.Errorf("after the cancelled Acquire: %d puts and %d deletes reached the server, want the late put and its delete, or neither", puts, deletes)
	}
	if err := lh.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	l, err := m.TryAcquire(opCtx(t))
	if err != nil {
		t.Fatalf("TryAcquire after the holder released: %v (something was left behind)", err)
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
}

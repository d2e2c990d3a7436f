package mutex_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// connect opens a Session for the test and closes it at cleanup.
func connect(t testing.TB, cl *zktest.Cluster, opts ...recipe.Option) *recipe.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := recipe.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newMutex builds a Mutex or fails the test.
func newMutex(t testing.TB, s *recipe.Session, p string) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, p)
	if err != nil {
		t.Fatalf("mutex.New(%q): %v", p, err)
	}
	return m
}

// inspector is a raw go-zookeeper connection (no recipes) used to look at and
// tamper with the tree. Paths given to its methods are relative to the
// cluster's chroot.
type inspector struct {
	t      testing.TB
	conn   *zk.Conn
	chroot string
}

func inspect(t testing.TB, cl *zktest.Cluster) *inspector {
	t.Helper()
	conn, _, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return &inspector{t: t, conn: conn, chroot: cl.Chroot()}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func (in *inspector) children(p string) []string {
	in.t.Helper()
	c, _, err := in.conn.Children(in.chroot + p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		in.t.Fatalf("children %s: %v", p, err)
	}
	slices.Sort(c)
	return c
}

// owned lists the children of dir whose ephemeral owner is the session.
func (in *inspector) owned(dir string, session int64) []string {
	in.t.Helper()
	var out []string
	for _, c := range in.children(dir) {
		ok, st, err := in.conn.Exists(in.chroot + path.Join(dir, c))
		if err != nil {
			in.t.Fatal(err)
		}
		if ok && st.EphemeralOwner == session {
			out = append(out, c)
		}
	}
	return out
}

func (in *inspector) stat(p string) *zk.Stat {
	in.t.Helper()
	ok, st, err := in.conn.Exists(in.chroot + p)
	if err != nil {
		in.t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return st
}

func (in *inspector) delete(p string) {
	in.t.Helper()
	if err := in.conn.Delete(in.chroot+p, -1); err != nil {
		in.t.Fatalf("delete %s: %v", p, err)
	}
}

func (in *inspector) create(p string, acl []zk.ACL) {
	in.t.Helper()
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := in.chroot
	for i, part := range parts {
		cur += "/" + part
		a := zk.WorldACL(zk.PermAll)
		if i == len(parts)-1 && acl != nil {
			a = acl
		}
		if _, err := in.conn.Create(cur, nil, 0, a); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			in.t.Fatalf("create %s: %v", cur, err)
		}
	}
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acquireAsync starts Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, l recipe.Lock) <-chan result {
	ch := make(chan result, 1)
	go func() {
		lease, err := l.Acquire(ctx)
		ch <- result{lease, err, time.Now()}
	}()
	return ch
}

type result struct {
	lease recipe.Lease
	err   error
	at    time.Time
}

func await(t testing.TB, ch <-chan result, d time.Duration) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("Acquire did not return within %v", d)
		return result{}
	}
}

// doneAt records when a context ends.
type doneAt struct {
	mu sync.Mutex
	at time.Time
}

func watchDone(ctx context.Context) *doneAt {
	d := &doneAt{}
	context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.at = time.Now()
		d.mu.Unlock()
	})
	return d
}

func (d *doneAt) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

func release(t testing.TB, l recipe.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// acquireAndRelease checks that a fresh client gets the lock within 10 s
// (nothing left behind blocks it), then releases it.
func acquireAndRelease(t testing.TB, cl *zktest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := newMutex(t, connect(t, cl), dir).Acquire(ctx)
	if err != nil {
		t.Fatalf("a fresh client could not acquire: %v", err)
	}
	release(t, l)
}

// handOver queues next behind the holder of held, releases held, and checks
// that next acquires within 10 s (nothing left behind blocks it), then
// releases it.
func handOver(t testing.TB, held recipe.Lease, next recipe.Lock) {
	t.Helper()
	ch := acquireAsync(context.Background(), next)
	release(t, held)
	r := await(t, ch, 10*time.Second)
	if r.err != nil {
		t.Fatalf("next holder: %v", r.err)
	}
	release(t, r.lease)
}

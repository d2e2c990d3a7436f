package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// groupSession connects a Session (3 s TTL) to srv on its own key prefix,
// closed at the test's end, and returns it with an inspector client.
func groupSession(t *testing.T, srv *etcdtest.Server) (*Session, *clientv3.Client, context.Context) {
	t.Helper()
	prefix := etcdtest.Prefix(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := Connect(ctx, srv.URL(prefix), WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv.Client(t), ctx
}

// register makes a registrar of id in a group named name, and its first
// registration.
func register(t *testing.T, s *Session, ctx context.Context, id, data string) (*registrar, *lease) {
	t.Helper()
	gr, err := NewGroup(s, "g")
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistrar(gr, id)
	if !s.claim(r.key) {
		t.Fatal("claimed already")
	}
	t.Cleanup(func() { _ = r.Remove(context.Background()) })
	l, err := r.Register(ctx, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return r, l.(*lease)
}

// The settle rule of Update: a write whose answer was lost is found
// applied (one version more, the same lease, a pending value) and taken as
// ours; any other write since the last confirmed one is ErrConflict.
func TestGroupUpdateSettlesLostReply(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Shared(t))
	r, l := register(t, s, ctx, "m", "v1")
	lostReply := func(value string) { // our put applied, its answer lost
		t.Helper()
		r.mu.Lock()
		r.w.pending = append(r.w.pending, []byte(value))
		r.mu.Unlock()
		if _, err := in.Put(ctx, r.key, value, clientv3.WithLease(l.g.id)); err != nil {
			t.Fatal(err)
		}
	}
	lostReply("v2")
	if err := r.Update(ctx, l, []byte("v3")); err != nil {
		t.Fatalf("update after a lost reply of ours: %v", err)
	}
	lostReply("v4")
	if err := r.Update(ctx, l, []byte("v4")); err != nil {
		t.Fatalf("the same update again after its lost reply: %v", err)
	}
	resp, err := in.Get(ctx, r.key)
	if err != nil || string(resp.Kvs[0].Value) != "v4" || resp.Kvs[0].Version != 4 {
		t.Fatalf("key after settled updates: %v, %v; want v4, version 4", resp.Kvs, err)
	}

	// Not ours: a value never sent, two writes since, another lease.
	for i, foreign := range []func(){
		func() { put(t, in, r.key, "x", clientv3.WithLease(l.g.id)) },
		func() {
			lostReply("v5")
			put(t, in, r.key, "v5", clientv3.WithLease(l.g.id))
		},
		func() {
			r.mu.Lock()
			r.w.pending = append(r.w.pending, []byte("v6"))
			r.mu.Unlock()
			put(t, in, r.key, "v6") // one write, a pending value, but no lease
		},
	} {
		resp, err := in.Get(ctx, r.key) // the last confirmed write: the key as it is
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.w = written{rev: l.rev, mod: resp.Kvs[0].ModRevision, ver: resp.Kvs[0].Version}
		r.mu.Unlock()
		foreign()
		if err := r.Update(ctx, l, []byte("z")); !errors.Is(err, recipe.ErrConflict) {
			t.Fatalf("case %d: update after a foreign write: %v, want ErrConflict", i, err)
		}
	}
}

func put(t *testing.T, in *clientv3.Client, key, value string, opts ...clientv3.OpOption) {
	t.Helper()
	if _, err := in.Put(context.Background(), key, value, opts...); err != nil {
		t.Fatal(err)
	}
}

// A key of the member's own under the Session's current etcd lease, left
// by an earlier registration, is deleted and put again; one under another
// lease is ErrMemberExists.
func TestGroupRegisterLeftover(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Shared(t))
	gr, err := NewGroup(s, "g")
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistrar(gr, "m")
	s.claim(r.key)
	defer r.Remove(ctx)
	g, err := s.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := in.Put(ctx, r.key, "old", clientv3.WithLease(g.id))
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Register(ctx, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(l.Token()) <= old.Header.Revision {
		t.Fatalf("registered at %d, not after the leftover (%d)", l.Token(), old.Header.Revision)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := in.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Revoke(context.Background(), other.ID)
	if _, err := in.Put(ctx, r.key, "theirs", clientv3.WithLease(other.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, []byte("new")); !errors.Is(err, recipe.ErrMemberExists) {
		t.Fatalf("register over another lease's key: %v", err)
	}
	if resp, err := in.Get(ctx, r.key); err != nil || string(resp.Kvs[0].Value) != "theirs" {
		t.Fatalf("the other lease's key: %v, %v", resp, err)
	}
}

// A watch from a compacted revision gives up for a new read. The server is
// the test's own: a compaction of the shared one would cut the history
// other tests read.
func TestGroupWatchFromCompacted(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Start(t))
	gr, err := NewGroup(s, "g")
	if err != nil {
		t.Fatal(err)
	}
	st, err := gr.list(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := in.Put(ctx, gr.dir+"a", "x"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := in.Get(ctx, gr.dir+"a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	w := &watcher{gr: gr, out: make(chan recipe.View, 1), st: st}
	if err := w.follower().follow(ctx, st.rev); !errors.Is(err, errCompacted) {
		t.Fatalf("follow from a compacted revision: %v", err)
	}
}

// A quiet group that is not empty is unchanged; a key written after its
// read is a silent change. (The check counted with WithMinModRev, which
// etcd ignores for the count: every quiet non-empty group was read again
// every TTL, with a warning.)
func TestGroupUnchanged(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Shared(t))
	gr, err := NewGroup(s, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := in.Put(ctx, gr.dir+k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := gr.list(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{gr: gr, out: make(chan recipe.View, 1), st: st}
	if err := w.follower().unchanged(ctx); err != nil {
		t.Errorf("a quiet group of %d keys: %v, want unchanged", len(st.keys), err)
	}
	if _, err := in.Put(ctx, gr.dir+"a", "y"); err != nil {
		t.Fatal(err)
	}
	if err := w.follower().unchanged(ctx); !errors.Is(err, errSilentChange) {
		t.Errorf("after a write: %v, want errSilentChange", err)
	}
}

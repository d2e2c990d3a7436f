package etcdlock

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// An observer's watch from a compacted revision gives up with
// errCompacted (run then reads again at once), and its read after that
// delivers the lock's state.
func TestHolderObserverCompacted(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Start(t)) // a server of its own: the compaction is for this test only
	m, err := New(s, "compacted")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	resp, err := in.Put(ctx, s.prefix+"/compacted-elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	o := &holderObserver{m: m, out: notify.NewLatest(recipe.HolderState.Equal)}
	o.last.rev = int64(l.Token()) - 1 // a read before the grant, compacted since
	if err := o.follow(ctx); !errors.Is(err, errCompacted) {
		t.Fatalf("follow from a compacted revision: %v, want errCompacted", err)
	}
	if err := o.read(ctx); err != nil {
		t.Fatal(err)
	}
	if st := <-o.out.C(); st != (recipe.HolderState{Held: true, Holder: recipe.Holder{ID: s.Identity(), Token: l.Token()}}) {
		t.Errorf("state read after compaction: %+v", st)
	}
}

// deliver coalesces for a slow reader, never hands the reader the same
// state twice in a row (a state replaced before it was taken, then the
// reader's own again), and drops a state whose Token goes back.
func TestHolderObserverDeliver(t *testing.T) {
	o := &holderObserver{out: notify.NewLatest(recipe.HolderState.Equal)}
	a := recipe.HolderState{Held: true, Holder: recipe.Holder{ID: "a", Token: 5}}
	a2 := recipe.HolderState{Held: true, Holder: recipe.Holder{ID: "a2", Token: 5}}
	free := recipe.HolderState{}
	old := recipe.HolderState{Held: true, Holder: recipe.Holder{ID: "old", Token: fence.Token(3)}}
	o.deliver(a)
	if got := <-o.out.C(); got != a {
		t.Fatalf("took %v, want %v", got, a)
	}
	o.deliver(a)  // no change: nothing
	o.deliver(a2) // not taken ...
	o.deliver(a)  // ... and back to what the reader has
	select {
	case got := <-o.out.C():
		t.Fatalf("took %v after a2 was replaced by the reader's own state", got)
	default:
	}
	o.deliver(free)
	o.deliver(old) // a Token going back
	if got := <-o.out.C(); got != free {
		t.Fatalf("took %v, want %v", got, free)
	}
	select {
	case got := <-o.out.C():
		t.Fatalf("took %v, a Token going back", got)
	default:
	}
}

package zookeeper_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/internal/zkname"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// zeros is the GUID of the issue's names.
const zeros = "00000000000000000000000000000000"

// markerName is the lock-delay marker's name beside a lock's nodes.
const markerName = "_lock-delay"

// wantReserved fails the test unless err is the refusal of a path with a
// segment named like a queue node.
func wantReserved(t *testing.T, what string, err error) {
	t.Helper()
	var pe *zookeeper.PathError
	if !errors.Is(err, zookeeper.ErrReservedName) || !errors.Is(err, recipe.ErrInvalidPath) || !errors.As(err, &pe) {
		t.Errorf("%s: %v, want a *zookeeper.PathError matching zookeeper.ErrReservedName and recipe.ErrInvalidPath", what, err)
	}
}

// TestReservedNamesIssue23 replays issue 23's finding 4 against a real
// server: a lock named "P/_c_<32 zeros>-lock-0000000000" made the lock P
// look held while it was held, and the "-read-" form made P's lock and
// election fail with recipe.ErrMixedRecipes. Both names are now refused
// by the constructor, and P stays free.
func TestReservedNamesIssue23(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const p = "/issue23/P"
	for _, kind := range []string{mutex.Kind, mutex.ReadKind} {
		bad := p + "/_c_" + zeros + "-" + kind + "0000000000"
		m, err := mutex.New(s, bad)
		wantReserved(t, "mutex.New("+bad+")", err)
		if err == nil { // what the old code let happen: hold it, and look at P
			held, err := m.Acquire(ctx)
			if err != nil {
				t.Fatalf("acquiring %s: %v", bad, err)
			}
			defer held.Release(context.Background())
		}
		pm, err := mutex.New(s, p)
		if err != nil {
			t.Fatal(err)
		}
		l, err := pm.TryAcquire(ctx)
		if err != nil {
			t.Errorf("with %s tried, the lock %s: %v (want it free)", bad, p, err)
		} else if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := election.New(s, p)
		if err != nil {
			t.Fatal(err)
		}
		l, err = e.TryCampaign(ctx, []byte("c"))
		if err != nil {
			t.Errorf("with %s tried, the election %s: %v (want it won)", bad, p, err)
		} else if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReservedNamesEveryConstructor: every constructor that takes a path
// refuses one with a segment named like a queue node (of its own kind, of
// another recipe's, of a kind nobody uses, in any segment), and nothing is
// created on the server; so does Connect for such a chroot, before it
// connects.
func TestReservedNamesEveryConstructor(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	in := zktest.Inspect(t, cl)
	bad := []string{
		"/r/_c_" + zeros + "-lock-0000000000",
		"/r/_c_" + zeros + "-read-@0000000001@0000000002/x",
		"/_c_0123456789abcdef0123456789abcdef-job--000000042/r",
		"/r/" + markerName,
		"/r/" + markerName + "/x",
	}
	for _, p := range bad {
		_, err := mutex.New(s, p)
		wantReserved(t, "mutex.New", err)
		_, err = mutex.NewRW(s, p)
		wantReserved(t, "mutex.NewRW", err)
		_, err = mutex.NewSemaphore(s, p, 2)
		wantReserved(t, "mutex.NewSemaphore", err)
		_, err = election.New(s, p)
		wantReserved(t, "election.New", err)
		_, err = latch.New(s, p, "id")
		wantReserved(t, "latch.New", err)
		_, err = zookeeper.NewQueue(s, p, []string{"custom-"}, zookeeper.FirstHolds)
		wantReserved(t, "zookeeper.NewQueue", err)
		_, err = fencezk.New(s, p)
		wantReserved(t, "fencezk.New", err)
		wantReserved(t, "zkside's ValidatePath (fencezk's check)", zkside.SessionOf(s).ValidatePath(p))
		if why, reserved := zkname.CheckPath(p); why == "" || !reserved {
			t.Errorf("zkname.CheckPath(%q) (the CLI's check) = %q, %v, want refused as reserved", p, why, reserved)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		s2, err := zookeeper.Connect(ctx, []string{cl.Servers()[0] + p})
		cancel()
		if err == nil {
			s2.Close()
		}
		wantReserved(t, "Connect with chroot "+p, err)
	}
	for _, p := range []string{"/r", "/_c_0123456789abcdef0123456789abcdef-job--000000042"} {
		if in.Stat(p) != nil {
			t.Errorf("a refusal created %s", p)
		}
	}
}

// TestReservedCoversEveryNodeTheRecipesCreate takes a grant of every
// recipe (and a downgrade's anchored read node) on a real server and checks
// that a path ending in, or passing through, the name of its node is
// refused: whatever name the engine gives a node, no recipe's directory
// can be named like it.
func TestReservedCoversEveryNodeTheRecipesCreate(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var leases []recipe.Lease
	take := func(l recipe.Lease, err error) recipe.Lease {
		t.Helper()
		must(err)
		leases = append(leases, l)
		return l
	}
	m, err := mutex.New(s, "/every/mutex")
	must(err)
	take(m.Acquire(ctx))
	rw, err := mutex.NewRW(s, "/every/rw")
	must(err)
	take(rw.Downgrade(ctx, take(rw.WriteLock().Acquire(ctx))))
	rw2, err := mutex.NewRW(s, "/every/rw2")
	must(err)
	take(rw2.ReadLock().Acquire(ctx))
	sem, err := mutex.NewSemaphore(s, "/every/sem", 2)
	must(err)
	take(sem.Acquire(ctx))
	e, err := election.New(s, "/every/election")
	must(err)
	take(e.Campaign(ctx, []byte("c")))
	la, err := latch.New(s, "/every/latch", "id")
	must(err)
	must(la.Start(ctx))
	defer la.Close(context.Background())
	take(la.Await(ctx))
	q, err := zookeeper.NewQueue(s, "/every/custom", []string{"custom-9"}, zookeeper.FirstHolds)
	must(err)
	take(q.Acquire(ctx, "custom-9", nil))
	dm, err := mutex.New(s, "/every/delayed", mutex.WithLockDelay(time.Second))
	must(err)
	take(dm.Acquire(ctx))

	// Every child of every recipe directory (queue nodes and records, the
	// lock-delay marker) is refused as a path segment.
	in := zktest.Inspect(t, cl)
	children, _, err := in.Conn().Children(cl.Chroot() + "/every/delayed")
	must(err)
	if !slices.Contains(children, markerName) {
		t.Errorf("the delayed lock's directory holds %q, want its marker too", children)
	}
	for _, l := range leases {
		dir := path.Dir(l.(interface{ Path() string }).Path())
		children, _, err := in.Conn().Children(cl.Chroot() + dir)
		must(err)
		for _, c := range children {
			wantReserved(t, "the name of "+dir+"'s child "+c, zkside.SessionOf(s).ValidatePath("/other/"+c))
			_, err := mutex.New(s, dir+"/"+c)
			wantReserved(t, "a lock in "+dir+" named like its child "+c, err)
		}
	}

	kinds := map[string]bool{}
	for _, l := range leases {
		node := l.(interface{ Path() string }).Path()
		kinds[path.Base(path.Dir(node))] = true
		_, err := mutex.New(s, node)
		wantReserved(t, "a lock named like the node "+node, err)
		wantReserved(t, "a path through "+node, zkside.SessionOf(s).ValidatePath(node+"/sub"))
		wantReserved(t, "the node's name under another parent", zkside.SessionOf(s).ValidatePath("/other/"+path.Base(node)))
	}
	if len(kinds) != 8 {
		t.Errorf("nodes checked in %d directories, want 8: %v", len(kinds), kinds)
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil && !errors.Is(err, recipe.ErrLeaseLost) {
			t.Error(err)
		}
	}
}

// TestReservedMarkerIssue37 replays issue 37's item 2 against a real
// server: a lock named "P/_lock-delay" (the name of P's lock-delay marker)
// made P's grants with mutex.WithLockDelay fail with
// recipe.ErrMixedRecipes while it was held, and serve a delay nobody
// needed after it was released (its empty directory stayed, taken for a
// marker naming a gone node). The name is now refused by the constructor,
// and P is granted at once.
func TestReservedMarkerIssue37(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const p = "/issue37/P"
	bad := p + "/" + markerName
	m, err := mutex.New(s, bad)
	wantReserved(t, "mutex.New("+bad+")", err)
	pm, err2 := mutex.New(s, p, mutex.WithLockDelay(5*time.Second))
	if err2 != nil {
		t.Fatal(err2)
	}
	try := func(what string) {
		t.Helper()
		l, err := pm.TryAcquire(ctx)
		if err != nil {
			t.Errorf("%s, the lock %s with a lock-delay: %v (want it granted)", what, p, err)
			return
		}
		if d := recipe.LockDelayServed(l); d != 0 {
			t.Errorf("%s, the lock %s served a lock-delay of %v, after no unclean end", what, p, d)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err == nil { // what the old code let happen: hold it, and look at P
		held, err := m.Acquire(ctx)
		if err != nil {
			t.Fatalf("acquiring %s: %v", bad, err)
		}
		try("with " + bad + " held")
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	try("with " + bad + " tried")
}

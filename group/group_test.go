package group_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/group"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// newGroup is group.New on s, failing t.
func newGroup(t testing.TB, s *zookeeper.Session, dir string) *group.Group {
	t.Helper()
	g, err := group.New(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// join is Join with a 10 s bound; the member leaves at cleanup.
func join(t testing.TB, g *group.Group, id, data string) recipe.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := g.Join(ctx, id, []byte(data))
	if err != nil {
		t.Fatalf("Join(%q): %v", id, err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return m
}

// members is Members as "id=data,..." with a 10 s bound.
func members(t testing.TB, g *group.Group) (string, recipe.View) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := g.Members(ctx)
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	return show(v), v
}

func show(v recipe.View) string {
	var b []string
	for _, m := range v.Members {
		b = append(b, m.ID+"="+string(m.Data))
	}
	return strings.Join(b, ",")
}

// children counts the group directory's children, read on its own
// connection.
func children(t testing.TB, s *zookeeper.Session, dir string) int {
	t.Helper()
	cs, _, err := s.Conn().Children(zkside.SessionOf(s).Chroot() + dir)
	if errors.Is(err, zk.ErrNoNode) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// TestJoinUpdateLeave: members are listed in id order with their data;
// Update is seen; a duplicate id is refused and leaves nothing; a foreign
// child and a member-kind node without an id line are ignored; Leave
// leaves nothing.
func TestJoinUpdateLeave(t *testing.T) {
	cl := zktest.Shared(t)
	s1, s2 := rtest.Connect(t, cl), rtest.Connect(t, cl)
	dir := "/groups/basic"
	g1, g2 := newGroup(t, s1, dir), newGroup(t, s2, dir)
	b := join(t, g1, "b", "2")
	a := join(t, g2, "a", "1")
	if got, v := members(t, g1); got != "a=1,b=2" || v.Rev <= 0 || v.Members[0].Since <= 0 {
		t.Fatalf("members %q %+v", got, v)
	}
	ctx := context.Background()
	if _, err := g1.Join(ctx, "a", nil); !errors.Is(err, recipe.ErrMemberExists) {
		t.Fatalf("duplicate Join: %v", err)
	}
	for _, id := range []string{"", "a/b", strings.Repeat("x", 129), "x\ny"} {
		if _, err := g1.Join(ctx, id, nil); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Fatalf("Join(%q): %v", id, err)
		}
	}
	if _, err := g1.Join(ctx, "big", make([]byte, 2<<20)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Fatalf("Join with 2 MiB: %v", err)
	}
	if n := children(t, s1, dir); n != 2 {
		t.Fatalf("%d children after refused joins, want 2", n)
	}
	// Foreign children: a plain node, and a member-kind name with no id.
	abs := zkside.SessionOf(s1).Chroot() + dir
	if _, err := s1.Conn().Create(abs+"/foreign", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Conn().Create(abs+"/_c_0123456789abcdef0123456789abcdef-member-", []byte("no id line"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, []byte("1b")); err != nil {
		t.Fatal(err)
	}
	if got, _ := members(t, g1); got != "a=1b,b=2" {
		t.Fatalf("after update: %q", got)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if _, err := b.Registered(ctx); !errors.Is(err, recipe.ErrLeft) {
		t.Fatalf("Registered after Leave: %v", err)
	}
	if got, _ := members(t, g2); got != "a=1b" {
		t.Fatalf("after leave: %q", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Leave(cancelled); err != nil {
		t.Fatalf("Leave(done ctx): %v", err)
	}
	if n := children(t, s1, dir); n != 2 {
		t.Fatalf("%d children after leaving, want the 2 foreign ones", n)
	}
}

// TestUpdateConflict: a write by someone else makes Update fail with
// ErrConflict and write nothing; the member keeps its registration.
func TestUpdateConflict(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	dir := "/groups/conflict"
	g := newGroup(t, s, dir)
	m := join(t, g, "a", "1")
	ctx := context.Background()
	if err := m.Update(ctx, []byte("2")); err != nil {
		t.Fatal(err)
	}
	abs := zkside.SessionOf(s).Chroot() + dir
	cs, _, err := s.Conn().Children(abs)
	if err != nil || len(cs) != 1 {
		t.Fatal(cs, err)
	}
	if _, err := s.Conn().Set(abs+"/"+cs[0], []byte("a\nintruder"), -1); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(ctx, []byte("3")); !errors.Is(err, recipe.ErrConflict) {
		t.Fatalf("Update after a foreign write: %v", err)
	}
	if got, _ := members(t, g); got != "a=intruder" {
		t.Fatalf("members %q", got)
	}
	if rctx, err := m.Registered(ctx); err != nil || rctx.Err() != nil {
		t.Fatalf("Registered: %v", err)
	}
}

// TestSuspensionAndExpiry: a short cut ends the registration's context
// (ErrSuspended) and it comes back on the same node (same Since); a cut
// past the session timeout loses the node, and the member registers again
// by itself, on a new node, with its latest data, once.
func TestSuspensionAndExpiry(t *testing.T) {
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	sa := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(3*time.Second))
	sb := rtest.Connect(t, cl)
	dir := "/groups/faults"
	ga, gb := newGroup(t, sa, dir), newGroup(t, sb, dir)
	m := join(t, ga, "a", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	changes := m.Listen(ctx)
	first := <-changes
	rctx, err := m.Registered(ctx)
	if err != nil || !first.Registered {
		t.Fatal(first, err)
	}
	p.Cut()
	<-rctx.Done()
	if c := context.Cause(rctx); !errors.Is(c, recipe.ErrSuspended) {
		t.Fatalf("cause %v", c)
	}
	p.Resume()
	if _, err := m.Registered(ctx); err != nil {
		t.Fatal(err)
	}
	_, v := members(t, gb)
	if len(v.Members) != 1 || v.Members[0].Since != first.Since {
		t.Fatalf("after a short cut: %+v, Since was %d", v, first.Since)
	}
	if err := m.Update(ctx, []byte("2")); err != nil {
		t.Fatal(err)
	}
	rctx, _ = m.Registered(ctx)
	old := sa.ID()
	p.Blackhole()
	<-rctx.Done()
	serverkit.Eventually(t, 15*time.Second, "the server drops a", func() bool {
		got, _ := members(t, gb)
		return got == ""
	})
	p.Resume()
	serverkit.Eventually(t, 15*time.Second, "a registered again", func() bool {
		got, _ := members(t, gb)
		return got == "a=2"
	})
	if sa.ID() == old {
		t.Fatal("same session: the test proves nothing")
	}
	_, v = members(t, gb)
	if v.Members[0].Since <= first.Since {
		t.Fatalf("Since %d after re-registration, was %d", v.Members[0].Since, first.Since)
	}
	if n := children(t, sb, dir); n != 1 {
		t.Fatalf("%d nodes", n)
	}
	var seq []string
	var c recipe.Registration
	for len(seq) < 4 {
		c = <-changes
		seq = append(seq, fmt.Sprint(c.Registered))
	}
	if got := strings.Join(seq, " "); got != "false true false true" {
		t.Fatalf("changes after the first: %s", got)
	}
	if c.Since != v.Members[0].Since {
		t.Fatalf("last change %+v, member %+v", c, v.Members[0])
	}
}

// TestWatchNeverGoesBack: writers change the group while a watcher
// follows it: every view is sorted with one entry per id, Revs never
// decrease, and the last view equals Members once the writers stop.
func TestWatchNeverGoesBack(t *testing.T) {
	cl := zktest.Shared(t)
	sw := rtest.Connect(t, cl)
	dir := "/groups/watch"
	gw := newGroup(t, sw, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	views := gw.Watch(ctx)
	if v := <-views; len(v.Members) != 0 {
		t.Fatalf("first view %+v", v)
	}
	var wg sync.WaitGroup
	for w := range 3 {
		s := rtest.Connect(t, cl)
		g := newGroup(t, s, dir)
		wg.Go(func() {
			for i := range 8 {
				m, err := g.Join(ctx, fmt.Sprintf("w%d-%d", w, i), []byte("x"))
				if err != nil {
					t.Error(err)
					return
				}
				_ = m.Update(ctx, []byte("y"))
				if i%2 == 0 {
					_ = m.Leave(ctx)
				} else {
					t.Cleanup(func() { _ = m.Leave(context.Background()) })
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var last recipe.View
	n := 0
	for collecting := true; collecting; {
		select {
		case v := <-views:
			check(t, last, v)
			last, n = v, n+1
		case <-done:
			collecting = false
		}
	}
	want, _ := members(t, gw)
	serverkit.Eventually(t, 10*time.Second, "the watch converges", func() bool {
		for {
			select {
			case v := <-views:
				check(t, last, v)
				last, n = v, n+1
			default:
				return show(last) == want
			}
		}
	})
	t.Logf("%d views delivered; last %q", n, want)
}

// check fails t if v goes back from last or is not sorted and unique.
func check(t *testing.T, last, v recipe.View) {
	t.Helper()
	if v.Rev < last.Rev {
		t.Fatalf("view Rev %d after %d", v.Rev, last.Rev)
	}
	for i := 1; i < len(v.Members); i++ {
		if v.Members[i-1].ID >= v.Members[i].ID {
			t.Fatalf("view not sorted or duplicated: %s", show(v))
		}
	}
}

// TestUpdateLostReply: a set whose reply is lost (applied) or which is
// dropped before the server sees it (not applied) is settled: Update
// returns nil either way, the data is written once, and the next Update
// is checked against the right version.
func TestUpdateLostReply(t *testing.T) {
	cl := zktest.Shared(t)
	var fault atomic.Int32 // the Fault for the next setData, then Pass
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpSetData {
			return zktest.Fault(fault.Swap(int32(zktest.Pass)))
		}
		return zktest.Pass
	})))
	g := newGroup(t, s, "/groups/lostreply")
	m := join(t, g, "a", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, f := range []zktest.Fault{zktest.SendAndCut, zktest.DropAndCut, zktest.Pass} {
		fault.Store(int32(f))
		data := fmt.Sprint(i + 1)
		if err := m.Update(ctx, []byte(data)); err != nil {
			t.Fatalf("Update %s under %v: %v", data, f, err)
		}
		if got, _ := members(t, g); got != "a="+data {
			t.Fatalf("after %v: %q", f, got)
		}
	}
}

// TestRefusedAndDeleted: a directory whose ACL refuses creates makes Join
// fail with ErrNoPermission and leaves nothing; a member whose node (and
// directory) someone deletes sees its context end with ErrNodeDeleted and
// registers again, on a new node, re-creating the directory.
func TestRefusedAndDeleted(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/groups/readonly", zk.WorldACL(zk.PermRead))
	s := rtest.Connect(t, cl)
	if _, err := newGroup(t, s, "/groups/readonly").Join(context.Background(), "a", nil); !errors.Is(err, recipe.ErrNoPermission) {
		t.Fatalf("Join under a read-only ACL: %v", err)
	}
	if c := in.Children("/groups/readonly"); len(c) != 0 {
		t.Fatalf("nodes %v", c)
	}

	dir := "/groups/deleted"
	g := newGroup(t, s, dir)
	m := join(t, g, "a", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rctx, err := m.Registered(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, before := members(t, g)
	abs := zkside.SessionOf(s).Chroot() + dir
	for _, c := range in.Children(dir) {
		if err := s.Conn().Delete(abs+"/"+c, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Conn().Delete(abs, -1); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatal(err)
	}
	<-rctx.Done()
	if c := context.Cause(rctx); !errors.Is(c, recipe.ErrNodeDeleted) {
		t.Fatalf("cause %v", c)
	}
	if _, err := m.Registered(ctx); err != nil {
		t.Fatal(err)
	}
	_, after := members(t, g)
	if len(after.Members) != 1 || after.Members[0].Since <= before.Members[0].Since || after.Rev <= before.Rev {
		t.Fatalf("before %+v, after %+v", before, after)
	}
}

// TestUpdateCancelled: an Update whose ctx is done sends nothing; one
// whose ctx ends as its set is sent (the reply lost) may have applied, and
// the next Update settles it instead of failing with ErrConflict (the
// new-user trial's report); Watch and Listen take a nil ctx.
func TestUpdateCancelled(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	var arm atomic.Bool
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpSetData && arm.Swap(false) {
			cancel()
			return zktest.SendAndCut
		}
		return zktest.Pass
	})))
	g := newGroup(t, s, "/groups/cancelled")
	m := join(t, g, "a", "0")
	done, stop := context.WithCancel(context.Background())
	stop()
	for range 5 {
		if err := m.Update(done, []byte("never")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Update(done ctx): %v", err)
		}
	}
	if got, _ := members(t, g); got != "a=0" {
		t.Fatalf("after Updates with a done ctx: %q", got)
	}
	arm.Store(true)
	if err := m.Update(ctx, []byte("1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update cancelled as sent: %v", err)
	}
	bg, bgCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer bgCancel()
	if err := m.Update(bg, []byte("2")); err != nil {
		t.Fatalf("the Update after: %v", err)
	}
	if got, _ := members(t, g); got != "a=2" {
		t.Fatalf("members %q", got)
	}
	//lint:ignore SA1012 a nil ctx is part of the contract
	views := g.Watch(nil) //nolint:staticcheck
	if v := <-views; len(v.Members) != 1 {
		t.Fatalf("Watch(nil): %+v", v)
	}
	//lint:ignore SA1012 a nil ctx is part of the contract
	changes := m.Listen(nil) //nolint:staticcheck
	if c := <-changes; !c.Registered {
		t.Fatalf("Listen(nil): %+v", c)
	}
	if err := m.Leave(bg); err != nil {
		t.Fatal(err)
	}
	for range changes { // the final one, then closed: its goroutine ends
	}
}

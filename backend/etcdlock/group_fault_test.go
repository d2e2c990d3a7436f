package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// relisten reads regs until a registration begins again, and returns what
// it read; the old registration's context must have ended by then.
func relisten(t *testing.T, regs <-chan recipe.Registration, old context.Context) []recipe.Registration {
	t.Helper()
	var seen []recipe.Registration
	timeout := time.After(15 * time.Second)
	for {
		select {
		case r, ok := <-regs:
			if !ok {
				t.Fatalf("registrations closed after %+v", seen)
			}
			seen = append(seen, r)
			if r.Registered {
				if old.Err() == nil {
					t.Fatal("registered again while the old registration's context lives")
				}
				return seen
			}
		case <-timeout:
			t.Fatalf("not registered again: %+v", seen)
		}
	}
}

// A member whose key is deleted by someone else sees its registration end
// (recipe.ErrNodeDeleted), then registers again by itself.
func TestGroupDeletedKeyRegistersAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	g := group(t, s, "del")
	m := join(t, g, "m", "d")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	regs := m.Listen(ctx)
	first := <-regs
	old, err := m.Registered(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/del/_member_m"); err != nil {
		t.Fatal(err)
	}
	seen := relisten(t, regs, old)
	if len(seen) != 2 || seen[1].Since <= first.Since || !errors.Is(seen[0].Cause, recipe.ErrNodeDeleted) {
		t.Fatalf("registrations after the delete: %+v (first %+v)", seen, first)
	}
	if v, err := g.Members(opCtx(t)); err != nil || members(v) != "m=d" || v.Members[0].Since != seen[1].Since {
		t.Fatalf("members after registering again: %+v, %v", v, err)
	}
}

// A member whose etcd lease is revoked from outside sees its registration
// end, then registers again by itself under the Session's next lease.
func TestGroupRevokedLeaseRegistersAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	g := group(t, s, "rev")
	m := join(t, g, "m", "d")
	if err := m.Update(opCtx(t), []byte("d2")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	regs := m.Listen(ctx)
	first := <-regs
	old, err := m.Registered(opCtx(t))
	if err != nil || !first.Registered {
		t.Fatalf("first registration: %+v, %v", first, err)
	}
	if _, err := e.in.Revoke(opCtx(t), s.ID()); err != nil {
		t.Fatal(err)
	}
	seen := relisten(t, regs, old)
	if len(seen) != 2 || seen[0].Registered || seen[1].Since <= first.Since {
		t.Fatalf("registrations after the revoke: %+v (first %+v)", seen, first)
	}
	if cause := context.Cause(old); !errors.Is(cause, recipe.ErrSessionLost) && !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("old registration's cause: %v", cause)
	}
	v, err := g.Members(opCtx(t))
	if err != nil || members(v) != "m=d2" || v.Members[0].Since != seen[1].Since {
		t.Fatalf("members after registering again: %+v, %v; want m=d2 since %d", v, err, seen[1].Since)
	}
}

// The two numbers of a Group: a member cut off from etcd sees its
// Registered context end before the others' Members drop it; a killed
// member stays visible until its etcd lease expires (about a TTL).
func TestGroupCutOffAndCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	obs, _ := e.connect(t)
	sCut, pCut := e.connect(t)
	sDead, pDead := e.connect(t)
	gObs := group(t, obs, "fail")
	cut := join(t, group(t, sCut, "fail"), "cut", "")
	join(t, group(t, sDead, "fail"), "dead", "")
	cutCtx, err := cut.Registered(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ended := make(chan time.Duration, 1)
	context.AfterFunc(cutCtx, func() { ended <- time.Since(start) })
	pCut.Blackhole()
	pDead.Close()
	gone := map[string]time.Duration{}
	serverkit.Eventually(t, 4*testTTL, "both members dropped", func() bool {
		v, err := gObs.Members(opCtx(t))
		if err != nil {
			return false
		}
		for _, id := range []string{"cut", "dead"} {
			if _, ok := gone[id]; !ok && !strings.Contains(" "+members(v)+" ", " "+id+"=") {
				gone[id] = time.Since(start)
			}
		}
		return len(gone) == 2
	})
	var ctxEnd time.Duration
	select {
	case ctxEnd = <-ended:
	default:
		t.Fatal("the cut-off member's Registered context lives after others dropped it")
	}
	t.Logf("TTL %v: cut-off member's Registered context ended %v after the cut, others dropped it %v after; killed member dropped %v after the kill",
		testTTL, ctxEnd, gone["cut"], gone["dead"])
	if ctxEnd > gone["cut"] {
		t.Errorf("the cut-off member's context ended at %v, not before others dropped it (%v)", ctxEnd, gone["cut"])
	}
	if cause := context.Cause(cutCtx); !errors.Is(cause, recipe.ErrSuspended) {
		t.Errorf("cut-off member's cause: %v, want ErrSuspended", cause)
	}
	for id, d := range gone {
		if d < testTTL/3 || d > testTTL+5*time.Second {
			t.Errorf("member %s dropped %v after its fault, want about a TTL (%v)", id, d, testTTL)
		}
	}
	pCut.Resume() // for a prompt Leave and Close
}

// A member that Leaves while its registration is suspended (no keep-alive
// acknowledged in time, the client cut off) leaves no key once the client
// heals, even though its etcd lease may live on: Leave deletes the last
// registration's key by its create revision (the nemesis's seed 5 found
// the key kept under a lease the Session went on keeping alive).
func TestGroupLeaveWhileSuspended(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, p := e.connect(t)
	g := group(t, s, "susp")
	m, err := g.Join(opCtx(t), "m", []byte("d"))
	if err != nil {
		t.Fatal(err)
	}
	rctx, err := m.Registered(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	<-rctx.Done()
	lctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.Leave(lctx) // unconfirmed while cut off: finished in the background
	p.Resume()
	serverkit.Eventually(t, 3*testTTL, "the key is deleted", func() bool {
		resp, err := e.in.Get(opCtx(t), e.prefix+"/susp/_member_m")
		return err == nil && len(resp.Kvs) == 0
	})
	time.Sleep(testTTL) // and it does not come back
	if resp, err := e.in.Get(opCtx(t), e.prefix+"/susp/_member_m"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key after Leave: %v %v", resp, err)
	}
}

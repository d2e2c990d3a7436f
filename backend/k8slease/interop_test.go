package k8slease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// timeline records who leads, and every moment two lead at once.
type timeline struct {
	mu      sync.Mutex
	leading map[string]bool
	turns   map[string]int
	overlap []string
}

func (tl *timeline) start(who string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for other, on := range tl.leading {
		if on {
			tl.overlap = append(tl.overlap, who+" started while "+other+" led")
		}
	}
	tl.leading[who] = true
	tl.turns[who]++
}

func (tl *timeline) stop(who string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.leading[who] = false
}

// elector returns a client-go leader election on the Lease name of the
// env's namespace, as an admin user, with identity id and the test
// duration (renew deadline 2/3 of it, retries every 300 ms).
func (e *env) elector(t *testing.T, name, id string, release bool, cb leaderelection.LeaderCallbacks) *leaderelection.LeaderElector {
	t.Helper()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Client:     e.c.Client(t).CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: testDuration, RenewDeadline: testDuration * 2 / 3, RetryPeriod: 300 * time.Millisecond,
		ReleaseOnCancel: release, Callbacks: cb, Name: name,
	})
	if err != nil {
		t.Fatal(err)
	}
	return le
}

// TestClientGoInterop runs a client-go elector and two of this package's
// contenders on one Lease, each leading in turns of 200 ms and giving the
// Lease up after each: nobody ever starts leading while another leads, and
// each side leads several times (each respects the other's holder and
// takes a released Lease).
func TestClientGoInterop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name, rounds = "mixed", 4
	tl := &timeline{leading: map[string]bool{}, turns: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { // client-go: one RunOrDie per turn, cancelled after it
		for i := 0; i < rounds && ctx.Err() == nil; i++ {
			rctx, rcancel := context.WithCancel(ctx)
			le := e.elector(t, name, "client-go", true, leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					tl.start("client-go")
					time.Sleep(200 * time.Millisecond)
					tl.stop("client-go")
					rcancel() // ReleaseOnCancel writes the Lease with no holder
				},
				OnStoppedLeading: func() {},
			})
			le.Run(rctx)
			rcancel()
		}
	})
	for _, who := range []string{"ours-1", "ours-2"} {
		s, _ := e.connect(t, k8stest.AdminUser)
		m := mutex(t, s, name)
		wg.Go(func() {
			for i := 0; i < rounds && ctx.Err() == nil; i++ {
				l, err := m.Acquire(ctx)
				if err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				tl.start(who)
				time.Sleep(200 * time.Millisecond)
				tl.stop(who)
				if err := l.Release(ctx); err != nil {
					t.Errorf("%s: release: %v", who, err)
				}
			}
		})
	}
	wg.Wait()
	for _, o := range tl.overlap {
		t.Error(o)
	}
	if tl.turns["client-go"] != rounds || tl.turns["ours-1"] != rounds || tl.turns["ours-2"] != rounds {
		t.Errorf("turns: %v, want %d each", tl.turns, rounds)
	}
}

// TestClientGoHolderRespected checks each side against the other's
// holder: ours is refused while a client-go leader renews, and takes over
// a client-go leader that stopped without releasing no sooner than about a
// duration after its last renewal; a client-go elector does not lead while
// ours holds, and leads once ours is released.
func TestClientGoHolderRespected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "respect")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	led := make(chan struct{})
	gctx, gcancel := context.WithCancel(ctx)
	le := e.elector(t, "respect", "client-go", false, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) { close(led) },
		OnStoppedLeading: func() {},
	})
	done := make(chan struct{})
	go func() { defer close(done); le.Run(gctx) }()
	<-led
	time.Sleep(time.Second) // a few renewals
	if _, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while client-go leads: %v, want ErrLocked", err)
	}
	gcancel() // stops renewing, without a release
	<-done
	stopped := time.Now()
	if who, err := e.holder(ctx, "respect"); err != nil || who != "client-go" {
		t.Fatalf("holder after client-go stopped: %q, %v", who, err)
	}
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took < testDuration*2/3 {
		t.Errorf("took an unreleased client-go Lease %v after it stopped, want about %v", took, testDuration)
	}

	led2 := make(chan time.Time, 1)
	g2, gcancel2 := context.WithCancel(ctx)
	defer gcancel2()
	le2 := e.elector(t, "respect", "client-go-2", true, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) { led2 <- time.Now() },
		OnStoppedLeading: func() {},
	})
	done2 := make(chan struct{})
	go func() { defer close(done2); le2.Run(g2) }()
	select {
	case <-led2:
		t.Fatal("client-go led while ours held the Lease")
	case <-time.After(2 * testDuration):
	}
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-led2:
		if at.Before(released) {
			t.Error("client-go led before our release")
		}
	case <-time.After(3 * testDuration):
		t.Error("client-go did not lead after our release")
	}
	gcancel2()
	<-done2
}

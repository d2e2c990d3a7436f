package k8slease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// next returns the next state on ch, failing the test if none comes within
// 20 s or ch closes.
func next(t *testing.T, ch <-chan recipe.HolderState) recipe.HolderState {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("ObserveHolder's channel closed")
		}
		return st
	case <-time.After(20 * time.Second):
		t.Fatal("no state from ObserveHolder within 20 s")
	}
	panic("unreachable")
}

// closes checks that ch closes within 20 s (states before that are read).
func closes(t *testing.T, ch <-chan recipe.HolderState) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("ObserveHolder's channel still open 20 s after its end")
		}
	}
}

// heldBy checks that st shows l held by a grant of s.
func heldBy(t *testing.T, what string, st recipe.HolderState, s *k8slease.Session, l recipe.Lease) {
	t.Helper()
	if !st.Held || !strings.HasPrefix(st.Holder.ID, s.Identity()+"#") || st.Holder.Token != l.Token() {
		t.Fatalf("%s: %v (since %v), want held by %s#... with token %d", what, st, st.Holder.Since, s.Identity(), l.Token())
	}
}

// TestHolderReadsTheLease: Holder on a lock never taken, held (before and
// after the holder recorded its token in the Lease), and released; an
// observer started while it is held begins with the holder, and closes
// when its ctx ends; another closes when its Session closes.
func TestHolderReadsTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "who")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if st, err := m.Holder(ctx); err != nil || st.Held {
		t.Fatalf("never taken: %v, %v", st, err)
	}
	before := time.Now()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	st, err := m.Holder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	heldBy(t, "held", st, s, l)
	if st.Holder.Since.Before(before.Add(-time.Second)) || st.Holder.Since.After(after.Add(time.Second)) {
		t.Errorf("since %v, acquired between %v and %v", st.Holder.Since, before, after)
	}
	for { // the holder's first renewal records the token
		if cur, err := e.get(ctx, "who"); err != nil {
			t.Fatal(err)
		} else if cur.Annotations[k8slease.TokenAnnotation] != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st2, err := m.Holder(ctx); err != nil || st2 != st {
		t.Errorf("after the first renewal: %v, %v, want %v", st2, err, st)
	}

	octx, ocancel := context.WithCancel(ctx)
	ch := m.ObserveHolder(octx)
	heldBy(t, "observer started while held", next(t, ch), s, l)
	ocancel()
	closes(t, ch)

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := m.Holder(ctx); err != nil || st.Held {
		t.Fatalf("released: %v, %v", st, err)
	}

	s2, _ := e.connect(t, k8stest.AdminUser)
	ch2 := mutex(t, s2, "who").ObserveHolder(ctx)
	if st := next(t, ch2); st.Held {
		t.Errorf("second observer: %v, want free", st)
	}
	s2.Close()
	closes(t, ch2)
	if _, err := mutex(t, s2, "who").Holder(ctx); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Holder after Close: %v", err)
	}
}

// TestObserveHolderFollows: an observer follows three holders in turn,
// each with a larger token, and the free lock between and after them.
func TestObserveHolderFollows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch := mutex(t, s, "turns").ObserveHolder(ctx)
	if st := next(t, ch); st.Held {
		t.Fatalf("first: %v, want free", st)
	}
	var last recipe.Lease
	for i := range 3 {
		si, _ := e.connect(t, k8stest.AdminUser)
		l, err := mutex(t, si, "turns").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		heldBy(t, "holder", next(t, ch), si, l)
		if last != nil && l.Token() <= last.Token() {
			t.Errorf("holder %d: token %d after %d", i, l.Token(), last.Token())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if st := next(t, ch); st.Held {
			t.Fatalf("after release %d: %v, want free", i, st)
		}
		last = l
	}
}

// TestHolderHostileRecord: a Lease written by someone else, with a token
// annotation for its holder that is not a number, then one past the
// Lease's version: Holder says ErrBadRecord, and the observer skips it
// without ending, shows the silent holder free a duration after it first
// saw it, and follows the Lease's next holder (an identity with control
// characters, a stale annotation of another identity, a renewal since its
// grant: held, token unknown).
func TestHolderHostileRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "hostile")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leases := e.in.CoordinationV1().Leases(e.ns)
	now := metav1.NewMicroTime(time.Now())
	cur, err := leases.Create(ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile", Annotations: map[string]string{k8slease.TokenAnnotation: "abc mallory"}},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr("mallory"), LeaseDurationSeconds: ptr(int32(1)),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Holder(ctx); !errors.Is(err, k8slease.ErrBadRecord) {
		t.Fatalf("token not a number: %v, want ErrBadRecord", err)
	}
	cur.Annotations[k8slease.TokenAnnotation] = "18446744073709551615 mallory"
	start := time.Now() // the Session first sees this version after it: by Holder below
	if cur, err = leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Holder(ctx); !errors.Is(err, k8slease.ErrBadRecord) {
		t.Fatalf("token past the version: %v, want ErrBadRecord", err)
	}

	ch := m.ObserveHolder(ctx)
	if st := next(t, ch); st.Held {
		t.Fatalf("first: %v, want free (after the duration)", st)
	}
	if waited := time.Since(start); waited < testDuration {
		t.Errorf("a silent holder shown free %v after its last write, want at least %v", waited, testDuration)
	}

	later := metav1.NewMicroTime(time.Now().Add(time.Second))
	cur.Spec.HolderIdentity = ptr("\x01evil\n")
	cur.Spec.RenewTime = &later
	cur.Annotations[k8slease.TokenAnnotation] = "5 mallory"
	if _, err = leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := recipe.Holder{ID: "\x01evil\n", Token: 0, Since: cur.Spec.AcquireTime.Time}
	if st := next(t, ch); !st.Held || st.Holder.ID != want.ID || st.Holder.Token != 0 || !st.Holder.Since.Equal(want.Since) {
		t.Errorf("next holder: %v since %v, want %v since %v", st, st.Holder.Since, want, want.Since)
	}
	if st, err := m.Holder(ctx); err != nil || st.Holder.ID != want.ID || st.Holder.Token != 0 {
		t.Errorf("Holder: %v, %v", st, err)
	}
}

// TestHolderClientGo: a client-go elector's grant is shown with its
// identity and the token of its grant's write, kept across its renewals,
// and its release as free.
func TestHolderClientGo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "elected")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A free Lease to begin with: the observer watches from its version (a
	// watch of a Lease that does not exist starts at the newest version,
	// which the API server's cache can be seconds late to reach: the
	// grant's write would then be missed, and its token unknown).
	free := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "elected"}, Spec: coordv1.LeaseSpec{HolderIdentity: ptr("")}}
	if _, err := e.in.CoordinationV1().Leases(e.ns).Create(ctx, free, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch := m.ObserveHolder(ctx)
	if st := next(t, ch); st.Held {
		t.Fatalf("first: %v, want free", st)
	}
	gctx, gcancel := context.WithCancel(ctx)
	defer gcancel()
	led := make(chan struct{})
	le := e.elector(t, "elected", "client-go", true, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) { close(led) },
		OnStoppedLeading: func() {},
	})
	done := make(chan struct{})
	go func() { defer close(done); le.Run(gctx) }()
	st := next(t, ch)
	if !st.Held || st.Holder.ID != "client-go" || st.Holder.Token == 0 {
		t.Fatalf("client-go leads: %v", st)
	}
	<-led
	time.Sleep(time.Second) // a few renewals
	if h, err := m.Holder(ctx); err != nil || h.Holder.ID != "client-go" {
		t.Errorf("Holder while client-go leads: %v, %v", h, err)
	}
	gcancel() // ReleaseOnCancel: no holder
	<-done
	if st2 := next(t, ch); st2.Held {
		t.Errorf("after client-go's release: %v, want free (no state between: the token kept)", st2)
	}
}

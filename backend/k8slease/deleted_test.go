package k8slease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestDeleteUnderSlowHolder: an operator deletes a held Lease while the
// holder's link is 100 ms slower each way (its renewals still go through
// in time). The waiter's watch shows the deletion before the holder's
// does; a waiter that saw the Lease held counts its deletion as held for D,
// so it is granted after the holder's context ended, with a larger token.
// (Before, a deleted Lease was free at once: the waiter was granted about
// 20 ms after the delete, the holder's context ended about 110 ms after it.)
func TestDeleteUnderSlowHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s1, p1 := e.connect(t, k8stest.AdminUser)
	s2, _ := e.connect(t, k8stest.AdminUser)
	m1, m2 := mutex(t, s1, "deleted-slow"), mutex(t, s2, "deleted-slow")
	held, err := m1.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p1.SetLatency(100 * time.Millisecond)
	if _, err := m2.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) { // the waiter's Session sees it held
		t.Fatalf("TryAcquire of a held Lease: %v", err)
	}
	waiter := grantAfter(ctx, m2)
	time.Sleep(testDuration / 3) // the waiter watches; two renewals through the slowed link
	if err := context.Cause(held.Context()); err != nil {
		t.Fatalf("the slowed holder lost its lease before the delete: %v", err)
	}
	lostAt := make(chan time.Time, 1)
	go func() { <-held.Context().Done(); lostAt <- time.Now() }()
	deleted := time.Now()
	if err := e.in.CoordinationV1().Leases(e.ns).Delete(ctx, "deleted-slow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g := <-waiter
	var lost time.Time
	select {
	case lost = <-lostAt:
	case <-time.After(testDuration):
		t.Fatal("the holder's context outlived the delete by D")
	}
	t.Logf("after the delete: holder's context ended at %v (%v), waiter granted at %v",
		lost.Sub(deleted).Round(time.Millisecond), context.Cause(held.Context()), g.at.Sub(deleted).Round(time.Millisecond))
	if g.err != nil {
		t.Fatalf("waiter: %v", g.err)
	}
	if !g.at.After(lost) {
		t.Errorf("the waiter was granted %v before the holder's context ended", lost.Sub(g.at))
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("holder's cause: %v, want recipe.ErrNodeDeleted", cause)
	}
	if g.l.Token() <= held.Token() {
		t.Errorf("tokens: waiter %d, holder %d", g.l.Token(), held.Token())
	}
	if err := g.l.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestDeleteRule: what a contender does with an absent Lease depends on
// what its Session saw before. A Lease released by its holder is free at
// once to a Session that saw it held; one deleted while held is not (it
// counts as held for D after the Session saw it gone); a Session that
// never saw it held finds it free at once: the revocation doc.go states.
func TestDeleteRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s1, _ := e.connect(t, k8stest.AdminUser)
	s2, _ := e.connect(t, k8stest.AdminUser)
	s3, _ := e.connect(t, k8stest.AdminUser)
	m1, m2, m3 := mutex(t, s1, "deleted"), mutex(t, s2, "deleted"), mutex(t, s3, "deleted")
	try := func(m *k8slease.Mutex, step string, free bool) recipe.Lease {
		t.Helper()
		l, err := m.TryAcquire(ctx)
		switch {
		case free && err != nil:
			t.Fatalf("%s: %v, want a grant", step, err)
		case !free && !errors.Is(err, recipe.ErrLocked):
			t.Fatalf("%s: %v (lease %v), want recipe.ErrLocked", step, err, l)
		}
		return l
	}

	l1 := try(m1, "first grant", true)
	try(m2, "held", false)
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := try(m2, "released, seen held before", true)
	try(m1, "held again", false)

	if err := e.in.CoordinationV1().Leases(e.ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l2, recipe.ErrNodeDeleted)
	try(m1, "deleted while held, seen held by this Session", false)
	l3 := try(m3, "deleted while held, never seen by this Session", true)
	if l3.Token() <= l2.Token() {
		t.Errorf("token after the re-creation %d, before %d", l3.Token(), l2.Token())
	}
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l4 := try(m1, "re-created and released", true)
	if err := l4.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

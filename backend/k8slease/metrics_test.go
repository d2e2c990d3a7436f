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
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
)

// TestMetrics checks the events a Session reports to WithMetrics: Connect,
// a grant, a refused TryAcquire, a waiter, a Lease deleted under its
// holder (LeaseLost), the waiter's grant, a Release (no event) and Close.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &metricstest.Events{}
	rec.Forbid(t, "stale")
	s, _ := e.connect(t, k8stest.AdminUser, k8slease.WithMetrics(rec))
	rec.Expect(t, "Connect", "state UNKNOWN CONNECTED nil")
	dir := e.ns + "/metrics"
	m := mutex(t, s, "metrics")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l1, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire: %v", err)
	}
	rec.Expect(t, "grant and refusal", "started lock "+dir, "done lock "+dir+" nil", "started lock "+dir, "done lock "+dir+" locked")
	waiter := grantAfter(ctx, m)
	rec.WaitFor(t, 10*time.Second, "waiting lock "+dir+" +1")
	if err := e.in.CoordinationV1().Leases(e.ns).Delete(ctx, "metrics", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g := <-waiter
	if g.err != nil {
		t.Fatal(g.err)
	}
	waitLost(t, l1, recipe.ErrNodeDeleted)
	rec.ExpectAnyOrder(t, "deleted under the holder", "started lock "+dir, "waiting lock "+dir+" +1",
		"lost lock "+dir+" node_deleted", "waiting lock "+dir+" -1", "done lock "+dir+" nil")
	if err := g.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rec.Expect(t, "Release and Close", "state CONNECTED LOST session_closed")
}

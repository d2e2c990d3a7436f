package k8stest

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestProcessFaults (a cluster of its own): a Lease survives the API
// server's kill and restart and etcd's; while either is down, or the API
// server is paused, requests fail, and they work again after.
func TestProcessFaults(t *testing.T) {
	start := time.Now()
	c := Start(t)
	t.Logf("cluster started in %v", time.Since(start).Round(time.Millisecond))
	ns := Namespace(t, c)
	cs := c.Client(t)
	leases := cs.CoordinationV1().Leases(ns)
	created, err := leases.Create(ctxT(t, 30*time.Second), newLease("kept", "a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	down := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := leases.Get(ctx, "kept", metav1.GetOptions{}); err == nil {
			t.Fatalf("%s: a Get succeeded", what)
		}
	}
	kept := func(what string) {
		t.Helper()
		got, err := leases.Get(ctxT(t, 30*time.Second), "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
		if got.ResourceVersion != created.ResourceVersion || *got.Spec.HolderIdentity != "a" {
			t.Fatalf("after %s: Lease at %s holder %q, want %s %q", what,
				got.ResourceVersion, *got.Spec.HolderIdentity, created.ResourceVersion, "a")
		}
	}

	if err := c.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	down("API server killed")
	if err := c.PauseAPIServer(); err == nil {
		t.Error("PauseAPIServer on a killed server succeeded")
	}
	restart := time.Now()
	if err := c.RestartAPIServer(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted in %v", time.Since(restart).Round(time.Millisecond))
	kept("the API server's restart")

	if err := c.KillEtcd(); err != nil {
		t.Fatal(err)
	}
	down("etcd killed")
	if err := c.RestartEtcd(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	kept("etcd's restart")

	if err := c.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	down("API server paused")
	if err := c.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	kept("the API server's pause")

	// Close works on a paused server.
	if err := c.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProxy: a client of ProxiedConfig (TLS verified through the proxy's
// address) fails while the proxy is cut or blackholed and works again after
// Resume; latency delays each request by at least the latency.
func TestProxy(t *testing.T) {
	c := Shared(t)
	ns := Namespace(t, c)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	cfg, err := c.ProxiedConfig(p, AdminUser)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == c.Host() {
		t.Fatalf("proxied configuration dials the server itself (%s)", cfg.Host)
	}
	leases := clientFor(t, cfg).CoordinationV1().Leases(ns)
	get := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := leases.List(ctx, metav1.ListOptions{})
		return err
	}
	// After Cut or Resume the client may still hold the connection the
	// proxy closed: its next request can fail once (a broken pipe) before
	// it dials anew.
	works := func(what string) {
		t.Helper()
		var err error
		for i := 0; i < 3; i++ {
			if err = get(30 * time.Second); err == nil {
				return
			}
		}
		t.Fatalf("%s: %v", what, err)
	}
	works("through the proxy")
	p.Cut()
	if err := get(2 * time.Second); err == nil {
		t.Fatal("a request succeeded while the proxy is cut")
	}
	p.Resume()
	works("after Resume from Cut")
	p.Blackhole()
	if err := get(time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while blackholed: %v, want the deadline exceeded", err)
	}
	p.Resume()
	works("after Resume from Blackhole")
	const latency = 300 * time.Millisecond
	p.SetLatency(latency)
	start := time.Now()
	if err := get(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*latency {
		t.Fatalf("a request with %v latency each way took %v", latency, d)
	}
}

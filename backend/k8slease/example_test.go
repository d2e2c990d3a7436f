package k8slease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A job that must not run twice at once: take the Lease, fence the write
// with the lease's token, stop when the lease context ends.
func Example() {
	ctx := context.Background()
	cfg, ns := k8stest.ExampleConfig() // e.g. k8slease.ConfigFromKubeconfig("") and your namespace

	s, err := k8slease.Connect(ctx, cfg, k8slease.WithNamespace(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := k8slease.New(s, "nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	var guard fence.Guard // lives at the resource
	err = guard.Do("report", lease.Token(), func() error {
		select {
		case <-lease.Context().Done(): // ownership in doubt: don't start
			return context.Cause(lease.Context())
		default:
		}
		fmt.Println("report written")
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// report written
	// error: <nil>
}

// TryAcquire skips the run when another instance holds the Lease.
func ExampleMutex_TryAcquire() {
	ctx := context.Background()
	cfg, ns := k8stest.ExampleConfig()
	s1, err := k8slease.Connect(ctx, cfg, k8slease.WithNamespace(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s1.Close()
	s2, err := k8slease.Connect(ctx, cfg, k8slease.WithNamespace(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s2.Close()
	m1, _ := k8slease.New(s1, "cron-cleanup")
	m2, _ := k8slease.New(s2, "cron-cleanup")

	held, err := m1.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)
	_, err = m2.TryAcquire(ctx)
	fmt.Println("second instance skips:", errors.Is(err, recipe.ErrLocked))
	// Output: second instance skips: true
}

// Holder tells who holds the lock, as the Lease records it.
func ExampleMutex_Holder() {
	ctx := context.Background()
	cfg, ns := k8stest.ExampleConfig()
	s, err := k8slease.Connect(ctx, cfg, k8slease.WithNamespace(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, _ := k8slease.New(s, "nightly-report")

	st, err := m.Holder(ctx)
	fmt.Println(st, err)
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	st, _ = m.Holder(ctx)
	fmt.Println("held by this Session:", strings.HasPrefix(st.Holder.ID, s.Identity()+"#"),
		"with its token:", st.Holder.Token == lease.Token())
	_ = lease.Release(ctx)
	st, _ = m.Holder(ctx)
	fmt.Println(st)
	// Output:
	// free <nil>
	// held by this Session: true with its token: true
	// free
}

// ObserveHolder follows the holders of a lock: a dashboard, or a client
// that sends its requests to the current leader.
func ExampleMutex_ObserveHolder() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the observation: the channel closes
	cfg, ns := k8stest.ExampleConfig()
	s, err := k8slease.Connect(ctx, cfg, k8slease.WithNamespace(ns), k8slease.WithIdentity("report-runner"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, _ := k8slease.New(s, "nightly-report")

	states := m.ObserveHolder(ctx)
	fmt.Println(<-states)
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := <-states
	fmt.Println(st.Held, strings.HasPrefix(st.Holder.ID, "report-runner_"), st.Holder.Token == lease.Token())
	_ = lease.Release(ctx)
	fmt.Println(<-states)
	// Output:
	// free
	// true true true
	// free
}

package zookeeper_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// counters is a recipe.Metrics without any library: atomic counters, which never
// block. (Package recipe/prommetrics is the ready Prometheus adapter.)
type counters struct {
	grants, refusals, lost, stale atomic.Int64
	waiting                       atomic.Int64
}

func (c *counters) AcquireStarted(kind, dir string) {}
func (c *counters) AcquireDone(kind, dir string, took time.Duration, err error) {
	if err == nil {
		c.grants.Add(1)
	} else {
		c.refusals.Add(1)
	}
}
func (c *counters) Waiting(kind, dir string, delta int)                 { c.waiting.Add(int64(delta)) }
func (c *counters) LeaseLost(kind, dir string, cause error)             { c.lost.Add(1) }
func (c *counters) SessionState(from, to recipe.ConnState, cause error) {}
func (c *counters) StaleRejected(e *fence.StaleError)                   { c.stale.Add(1) }

// Install a recipe.Metrics on the Session: every recipe on it reports to it. A
// fence.Guard at the resource reports its rejections through OnStale.
func ExampleWithMetrics() {
	ctx := context.Background()
	var c counters
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers(), zookeeper.WithMetrics(&c))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	var guard fence.Guard
	guard.OnStale = c.StaleRejected

	m, _ := mutex.New(s, "/locks/report")
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := m.TryAcquire(ctx); err != nil {
		fmt.Println("second try:", err != nil)
	}
	guard.Check("report", lease.Token())
	guard.Check("report", lease.Token()-1) // a former holder's late write
	lease.Release(ctx)
	fmt.Println("grants", c.grants.Load(), "refusals", c.refusals.Load(), "lost", c.lost.Load(), "stale", c.stale.Load())
	// Output:
	// second try: true
	// grants 1 refusals 1 lost 0 stale 1
}

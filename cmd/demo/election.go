package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// leaderElection plays scene 3: three participants run election.Run, each on
// its own session behind its own network (a fault proxy). The leader is cut
// off; its leader function is stopped, a new leader takes over with a larger
// token, and the old leader's late write is rejected by the fence.
func (d *demo) leaderElection(ctx context.Context) bool {
	fmt.Println("\n== Scene 3: leader election; the leader is cut off, another takes over ==")
	dir := d.root + "/scheduler-election"
	var guard fence.Guard

	lt := &leaderTerms{newT: make(chan string, 16)}
	names := []string{"P1", "P2", "P3"}
	proxies := map[string]*serverkit.FaultProxy{}
	rctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wg sync.WaitGroup
	for _, who := range names {
		p := serverkit.NewFaultProxy()
		defer p.Close()
		proxies[who] = p
		s, err := d.connect(ctx, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(2*time.Second))
		if err != nil {
			return d.check(false, "connect %s: %v", who, err)
		}
		defer s.Close()
		e, err := election.New(s, dir, election.WithLogger(d.logger))
		if err != nil {
			return d.check(false, "election: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			election.Run(rctx, e, []byte(who), lt.lead(d, &guard, who))
		}()
	}
	stop := func() { stopAll(); wg.Wait() }

	var first string
	select {
	case first = <-lt.newT:
	case <-time.After(30 * time.Second):
		stop()
		return d.check(false, "no leader within 30 s")
	}
	time.Sleep(300 * time.Millisecond)
	proxies[first].Blackhole()
	d.say(first, "is cut off from ZooKeeper")
	var second string
	select {
	case second = <-lt.newT:
	case <-time.After(30 * time.Second):
		stop()
		return d.check(false, "no new leader within 30 s of the cut")
	}
	time.Sleep(300 * time.Millisecond)
	lt.mu.Lock()
	t1, t2 := lt.terms[0], lt.terms[len(lt.terms)-1]
	lt.mu.Unlock()
	staleErr := guard.Do("schedule", t1.token, func() error { return nil })
	d.say(first, "resumes and writes with its old token %v: %v", t1.token, staleErr)
	proxies[first].Resume()
	stop()

	ok := d.check(second != first, "a new leader took over (%s after %s)", second, first)
	ok = d.check(t2.token > t1.token, "the new leader's token %v > the old leader's %v", t2.token, t1.token) && ok
	ok = d.check(!t1.end.IsZero() && t1.end.Before(t2.started), "%s's leader function stopped (%v) before %s's started",
		first, t1.cause, second) && ok
	ok = d.check(errors.Is(staleErr, fence.ErrStale), "the old leader's late write rejected as stale") && ok
	return ok
}

// term is one term of leadership in scene 3.
type term struct {
	who          string
	token        fence.Token
	started, end time.Time
	cause        error
}

// leaderTerms records scene 3's terms, and tells who became leader.
type leaderTerms struct {
	mu    sync.Mutex
	terms []term
	newT  chan string // who became leader
}

// lead is who's leader function: it records the term and makes fenced
// writes until leadership ends.
func (lt *leaderTerms) lead(d *demo, guard *fence.Guard, who string) func(context.Context, fence.Token) error {
	return func(lctx context.Context, tok fence.Token) error {
		lt.mu.Lock()
		lt.terms = append(lt.terms, term{who: who, token: tok, started: time.Now()})
		i := len(lt.terms) - 1
		lt.mu.Unlock()
		d.say(who, "is leader, token %v: runs the scheduler", tok)
		lt.newT <- who
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				lt.mu.Lock()
				lt.terms[i].end, lt.terms[i].cause = time.Now(), context.Cause(lctx)
				lt.mu.Unlock()
				if cause := context.Cause(lctx); errors.Is(cause, context.Canceled) {
					d.say(who, "stops: the demo is over")
				} else {
					d.say(who, "leadership ended: %v", cause)
				}
				return nil
			case <-tick.C:
				_ = guard.Do("schedule", tok, func() error { return nil })
			}
		}
	}
}

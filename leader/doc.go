// Package leader runs a function only while the caller holds a lock, on any
// backend: the leader-gated loop of Curator's LeaderSelector (with
// autoRequeue), over a recipe.Lock. Run acquires the lock, runs fn with the
// grant's fencing token and a context that ends when the grant does,
// releases the lock when fn returns, and acquires again, until the caller
// stops it.
//
// The contract: fn runs while it leads and returns when its ctx ends. It
// is a standing loop of work (a scheduler, a consumer), not one unit of
// work. A fn that returns while still leading gives the lock up: by
// default Run campaigns again after DefaultRequeuePause; WithOnReturn
// chooses another pause (Requeue) or to end Run (Stop, for one job done
// once under the lock).
//
//	m, err := etcdlock.New(s, "scheduler") // or mutex.New, pglock.New, redislock.New, memlock.New
//	if err != nil { return err }
//	err = leader.Run(ctx, m, func(ctx context.Context, token fence.Token) error {
//		return runScheduler(ctx, token) // runs until ctx ends: the moment leadership is in doubt
//	})
//	if ctx.Err() != nil {
//		return nil // stopped by us: err is context.Cause(ctx)
//	}
//	return err // an error retrying cannot cure (recipe.Permanent)
//
// election.Run is this loop over a ZooKeeper election that also publishes a
// value (a leader's address, say) for others to read.
//
// # Run
//
// fn should run while it leads and return when its ctx ends. That ctx
// keeps ctx's values and is done when the lease's Context is or ctx ends
// (context.Cause says which). fn must then return promptly: Run waits for
// it (so fn never runs twice at once), the one window in which fn runs
// without leading. When fn returns (an error while leading is logged at
// warning level), panics (not recovered: the panic goes on after the
// release) or leadership is lost, Run releases the lease on a context that
// ignores ctx's cancellation.
//
// Run returns context.Cause(ctx) once ctx ends (a normal stop, after fn
// returned and the lease was released); earlier, an Acquire error retrying
// cannot cure (recipe.Permanent or WithPermanent; recipe.ErrMixedRecipes
// only when the next Acquire, after the backoff, fails with it too); with
// WithOnReturn(Stop()), what fn returned early (nil included: the one nil
// return of Run); recipe.ErrBadOption for a nil lock (a typed nil too) or fn
// or a negative Requeue pause. Other Acquire errors are logged at warning
// level and retried (a failed release is logged too).
//
//	if err := leader.Run(ctx, lock, fn); ctx.Err() == nil {
//		return fmt.Errorf("leader loop: %w", err) // a real failure
//	}
//
// # Health
//
// A Health (WithHealth) is the liveness check of client-go's
// HealthzAdaptor for Run: its Check, and its http.Handler for a probe,
// fail (ErrOverdue) while a leader function runs on more than the
// tolerance (DefaultTolerance: 5 s) after its lease ended, a process that
// acts as leader without the lock; the platform restarts it. A process
// that does not lead, or whose function returns in time, is healthy. The
// tolerance counts from when the process sees its lease end: a process
// stopped (SIGSTOP) past its lease sees it on resuming, its timers firing
// first; while stopped it answers no probe at all, which the probe's own
// timeout reports.
//
//	health, _ := leader.NewHealth(10 * time.Second)
//	http.Handle("/healthz", health)
//	err := leader.Run(ctx, lock, fn, leader.WithHealth(health))
//
// Code that leads without Run (a latch's Await, a plain Acquire) registers
// its work with Health.Track, and calls the function it returns once the
// work has stopped.
//
// # Why a requeue pause
//
// Before [DefaultRequeuePause], the pause was the backoff's first interval
// (100 ms ±50 %), so a fn that did one unit of work and returned took the
// lock about ten times a second (28 times in 3 s on ZooKeeper, issue 24):
// churn on the lock service and fencing tokens, and on a backend without a
// queue (Redis, PostgreSQL) the same candidate mostly won again. A second
// bounds that at about one term a second per candidate, leaves another
// candidate the time to take the lock, and keeps the loop standing (for
// every caller whose fn returns to give the lock up for a while, as before).
// election.Run keeps the old pace (RequeueWithBackOff).
package leader

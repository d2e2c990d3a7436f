package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Backoff between failed re-joins or waits.
const (
	backoffInitial = 50 * time.Millisecond
	backoffMax     = 2 * time.Second
)

// waitFailed and rejoinFailed are the warnings of a retried wait and join.
const (
	waitFailed   = "latch: waiting for leadership failed; retrying"
	rejoinFailed = "latch: re-joining failed; retrying"
)

// participant is the state of one run of the participant loop.
type participant struct {
	l       *Latch
	t       *zookeeper.Ticket // the current ticket: its node keeps our place
	stop    loop.Stopper
	joining bool // the attempt is joining again: a failure is the join's
}

// run is the participant loop (loop.Loop, as leader.Run's): wait for the
// grant on the ticket, lead until it ends, and wait again on the same ticket
// while it lives, or join again with a new one. It ends at Close, or on an
// error retrying cannot cure (the latch then ends with it).
func (l *Latch) run(t *zookeeper.Ticket, done chan struct{}) {
	defer close(done)
	p := &participant{l: l, t: t, stop: loop.Stopper{Confirm: recipe.ErrMixedRecipes}}
	defer func() {
		// Whatever ended the loop, the node goes now, even if Close stops
		// waiting (its own Leave is then a confirmation, and reports
		// errors). A dead ticket's node is gone already; a closed
		// session's node went with it.
		_ = p.t.Leave(context.Background())
	}()
	lp := loop.Loop{
		BackOff:  loop.BackOff(backoffInitial, backoffMax),
		Max:      backoffMax,
		Ends:     func(err error) bool { return p.stop.Stop(err, recipe.Permanent(err)) },
		Retrying: p.retrying,
	}
	if err := lp.Run(l.ctx, p.attempt); !errors.Is(err, ErrClosed) {
		l.stop(err)
	}
}

// attempt is one turn of the loop: join again if the ticket died, wait for
// the grant, lead until it ends.
func (p *participant) attempt(ctx context.Context) (loop.Next, error) {
	l := p.l
	p.joining = p.t.Err() != nil
	if p.joining {
		// The ticket died with its session or its node: join again. (Its
		// node is gone, or its deletion was handed to the Session's
		// cleaner by the engine.)
		why := p.t.Err()
		nt, err := l.q.Join(ctx, Kind, l.data)
		if err != nil {
			return loop.Wait, err
		}
		p.t = nt
		l.mu.Lock()
		l.ticket = nt
		l.mu.Unlock()
		l.log.Info("latch: re-joined", "dir", shortpath.Of(l.path), "id", l.id, "node", nt.Name(),
			"session", fmt.Sprintf("0x%x", l.s.ID()), "after", why)
		p.joining = false
	}
	start := time.Now()
	lease, err := p.t.Await(ctx)
	if err != nil {
		// A wait that failed at once backs off; one that waited long (a
		// session lost after a while) re-joins at once.
		if time.Since(start) < backoffMax {
			return loop.Wait, err
		}
		return loop.Now, err
	}
	return loop.Now, l.hold(ctx, lease)
}

func (p *participant) retrying(err error) {
	l := p.l
	switch {
	case p.joining:
		l.log.Warn(rejoinFailed, "dir", shortpath.Of(l.path), "id", l.id, "err", err)
	case p.t.Err() == nil:
		l.log.Warn(waitFailed, "dir", shortpath.Of(l.path), "id", l.id, "err", err)
	}
}

// hold publishes the grant, waits for its end and publishes that. It
// returns recipe.ErrSessionClosed when the grant ended with the session
// (which ends the loop), ctx's cause when the latch was closed.
func (l *Latch) hold(ctx context.Context, lease recipe.Lease) error {
	g := &grant{l: l, inner: lease, at: time.Now()}
	if !l.lead(g) {
		return context.Cause(ctx) // closed meanwhile: run's Leave releases it
	}
	select {
	case <-lease.Context().Done():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	cause := context.Cause(lease.Context())
	if errors.Is(cause, recipe.ErrSessionClosed) {
		return recipe.ErrSessionClosed
	}
	l.follow(g, cause)
	return nil
}

// lead publishes a grant; it reports false when the latch is closed.
func (l *Latch) lead(g *grant) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.cur = g
	l.listeners.Push(Change{Leader: true, Token: g.Token(), Lease: g, At: g.at})
	l.changed.Notify()
	return true
}

// follow publishes the end of grant g.
func (l *Latch) follow(g *grant, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == g {
		l.cur = nil
	}
	if l.closed {
		return // Close delivers the final Change
	}
	l.listeners.Push(Change{Leader: false, Token: g.Token(), At: time.Now(), Cause: cause})
	l.changed.Notify()
}

// stop ends the participant on an error retrying cannot cure: its node goes
// (run's deferred Leave), Await returns err, listeners get it as final Cause.
func (l *Latch) stop(err error) {
	if !errors.Is(err, recipe.ErrSessionClosed) {
		l.log.Error("latch: stopped: retrying cannot help", "dir", shortpath.Of(l.path), "id", l.id, "err", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = phaseEnded
	if l.endErr == nil {
		l.endErr = err
	}
	l.finishLocked(err)
}

// finishLocked delivers the final Change (once) and lets every listener
// close its channel after it.
func (l *Latch) finishLocked(cause error) {
	if l.listeners.Finished() {
		return
	}
	var tok fence.Token
	if l.cur != nil {
		tok = l.cur.Token()
	}
	l.cur = nil
	l.listeners.Finish(Change{Leader: false, Token: tok, At: time.Now(), Cause: cause})
	l.changed.Notify()
}

// Listen returns a channel that receives every change of this participant's
// leadership from now on, in order, the current grant first if it leads.
// Close or the session's end delivers a final Change (Leader false, Cause
// ErrClosed or recipe.ErrSessionClosed) and closes the channel; when ctx ends
// it is closed at once, and after Close it is returned closed. Delivery
// never blocks the latch nor go-zookeeper (case C19): each listener has its
// own unbounded queue and goroutine, which lives until the channel closes,
// so read until then or cancel ctx.
func (l *Latch) Listen(ctx context.Context) <-chan Change {
	f := notify.NewFeed[Change]()
	l.mu.Lock()
	if !l.listeners.Add(f) {
		l.mu.Unlock()
		f.Close()
		return f.C()
	}
	if g := l.cur; g != nil && g.inner.Context().Err() == nil {
		f.Push(Change{Leader: true, Token: g.Token(), Lease: g, At: g.at})
	}
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			l.listeners.Remove(f)
			l.mu.Unlock()
		}()
		f.Run(ctx, nil)
	}()
	return f.C()
}

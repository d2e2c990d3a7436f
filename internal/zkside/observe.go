package zkside

import (
	"context"
	"errors"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Source is a queue's head as Observe reads it.
type Source[H any] interface {
	// Read returns the head now, a channel closed when it may have changed,
	// and the release of that watch.
	Read(ctx context.Context) (h H, changed <-chan struct{}, release func(), err error)
	// Same reports whether a reader that has a has nothing new in b.
	Same(a, b H) bool
}

// Observe is the loop of zookeeper.Queue.ObserveHead and ObserveHeadAs: it
// delivers conv(head) at once and after every change (Same; and, if same
// is set, a conv that differs) on one goroutine of o.Go, coalesced: a slow
// reader skips intermediate heads but always gets the latest. A failed read
// is retried a second later (logged at warning level) unless retrying
// cannot cure it (recipe.Permanent; recipe.ErrMixedRecipes met twice a
// second apart): then it is logged at error level and the channel closes,
// as it does when ctx ends or the Session is closed.
func Observe[H, T any](ctx context.Context, o Observed[H], conv func(H) T, same func(a, b T) bool) <-chan T {
	out := make(chan T)
	if !o.Go(func() { defer close(out); observe(ctx, o, conv, same, out) }) {
		close(out)
	}
	return out
}

// observe is Observe's goroutine.
func observe[H, T any](ctx context.Context, o Observed[H], conv func(H) T, same func(a, b T) bool, out chan<- T) {
	src := o.Source
	var delivered, pendingHead H // what the reader has; what it will have
	var pending, deliveredT T    // conv(pendingHead); conv(delivered)
	havePending, first := false, true
	ends := loop.Stopper{Confirm: recipe.ErrMixedRecipes}
	for {
		h, wake, stop, err := src.Read(ctx)
		if err != nil {
			if !retryRead(ctx, o, &ends, err) {
				return
			}
			continue
		}
		ends.Stop(nil, false)
		// Deliver h unless the reader already has it. A head read earlier
		// but not delivered yet is dropped either way: it is stale now
		// (case C16: a leader that came and went while the reader was
		// slow must not be delivered after "no leader" was).
		if t := conv(h); first || !src.Same(delivered, h) && (same == nil || !same(deliveredT, t)) {
			pending, pendingHead, havePending, first = t, h, true, false
		} else {
			havePending = false
		}
		for waiting := true; waiting; {
			var send chan<- T
			if havePending {
				send = out
			}
			select {
			case send <- pending:
				delivered, deliveredT, havePending = pendingHead, pending, false
			case <-wake:
				waiting = false
			case <-ctx.Done():
				stop()
				return
			case <-o.Quit:
				stop()
				return
			}
		}
		stop()
	}
}

// retryRead logs a failed read and waits a second before the next one; it
// reports false when the observation ends instead.
func retryRead[H any](ctx context.Context, o Observed[H], ends *loop.Stopper, err error) bool {
	if ctx.Err() != nil || errors.Is(err, recipe.ErrSessionClosed) {
		return false
	}
	if ends.Stop(err, recipe.Permanent(err)) {
		o.Log.Error("observe: reading the "+o.what()+" failed, and retrying cannot help: the observation ends", "dir", shortpath.Of(o.Dir), "err", err)
		return false
	}
	o.Log.Warn("observe: reading the "+o.what()+" failed; retrying", "dir", shortpath.Of(o.Dir), "err", err)
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-o.Quit:
	}
	return false
}

package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Run is the leader-gated loop, the shape of Curator's LeaderSelector with
// autoRequeue: until ctx ends, it campaigns with value (Election.Campaign),
// runs fn while the caller leads, gives leadership up when fn returns, and
// campaigns again.
//
// fn gets the leadership's fencing token and a context that is done when
// leadership ends or is in doubt (the lease's Context: see Campaign) or when
// ctx ends, whichever comes first; context.Cause tells which
// (recipe.ErrSuspended, recipe.ErrSessionLost, recipe.ErrNodeDeleted, ...,
// or ctx's cause). It keeps ctx's values. fn must return promptly once its
// context is done: Run waits for it, so fn never runs twice at once, but it
// is the one window in which fn runs while the caller no longer leads.
// Leadership is a lease: guard every effect with the token at the resource
// (fence.Guard), which rejects a late write of a former leader.
//
// When fn returns (nil or an error, which Run logs at warning level and
// otherwise ignores) or leadership is lost, Run resigns (the leader's znode
// is deleted, or left to the engine's cleanup when ownership was already
// lost) and campaigns again after a backoff (WithBackOff): the backoff grows
// while campaigns fail or fn fails (returns an error while still leading),
// and is reset after every other leadership. Failed campaigns are logged at
// warning level too.
//
// Run always returns a non-nil error. When the caller stops it by ending
// ctx, that error is context.Cause(ctx) (context.Canceled after a plain
// cancel, context.DeadlineExceeded after a deadline, the cause given to a
// context.WithCancelCause), returned after fn (if running) has returned and
// leadership was given up; Run leaves no znode behind. That is a normal
// stop, not a failure, as http.ErrServerClosed is from http.Server.Serve:
// bad arguments aside (reported at once), whenever ctx is done as Run
// returns, the error is ctx's cause, so
//
//	if err := election.Run(ctx, e, value, fn); ctx.Err() == nil {
//		return fmt.Errorf("leader loop: %w", err) // a real failure
//	}
//
// Run returns earlier, with the error, only when going on is pointless:
// ErrCampaigning (the Election is already campaigning or leading: use one
// Election per Run), or a campaign error that retrying cannot cure
// (recipe.Permanent): recipe.ErrMixedRecipes (the directory holds another
// recipe's nodes, e.g. a mutex's), recipe.ErrNoPermission (an ACL
// refusal), recipe.ErrTooLarge and recipe.ErrBadOption (value too large,
// nil e or fn), recipe.ErrSessionClosed (the session was closed). Any other
// campaign error (recipe.ErrSessionLost, recipe.ErrNodeDeleted when the
// directory was deleted, a connection failure) is logged and retried.
//
// ZooKeeper operations: those of Campaign and Resign, per leadership.
func Run(ctx context.Context, e *Election, value []byte, fn func(ctx context.Context, token fence.Token) error) error {
	switch {
	case e == nil:
		return fmt.Errorf("%w: nil *Election", recipe.ErrBadOption)
	case fn == nil:
		return fmt.Errorf("%w: nil leader function", recipe.ErrBadOption)
	}
	if err := e.q.CheckNodeData(value); err != nil {
		return fmt.Errorf("campaign value: %w", err)
	}
	b := e.backoff()
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		lease, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if errors.Is(err, ErrCampaigning) || recipe.Permanent(err) {
				return err
			}
			e.log.Warn("election: campaign failed; retrying", "dir", e.Path(), "err", err)
		} else {
			failed := e.lead(ctx, lease, fn)
			if !failed {
				b.Reset()
			}
		}
		if err := recipe.Pause(ctx, b, MaxRunBackOff); err != nil {
			return err
		}
	}
}

// lead runs fn for one leadership and resigns afterwards (also when fn
// panics). It reports whether fn failed: returned an error while its
// context was still live.
func (e *Election) lead(ctx context.Context, lease recipe.Lease, fn func(context.Context, fence.Token) error) (failed bool) {
	fctx, cancel := context.WithCancelCause(lease.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(recipe.ErrReleased)
		// Resign on a context of its own: ctx may be done, and the delete
		// must still be sent (and retried up to the cleanup timeout).
		if err := e.Resign(context.WithoutCancel(ctx)); err != nil {
			e.log.Warn("election: resign failed; the session's cleaner will delete the node", "dir", e.Path(), "err", err)
		}
	}()
	err := fn(fctx, lease.Token())
	live := fctx.Err() == nil
	if err != nil {
		e.log.Warn("election: leader function returned an error", "dir", e.Path(), "token", lease.Token(),
			"err", err, "leadership", causeText(fctx))
	}
	return err != nil && live
}

func causeText(ctx context.Context) string {
	if ctx.Err() == nil {
		return "held"
	}
	return context.Cause(ctx).Error()
}

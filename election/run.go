package election

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Run is the leader-gated loop, the shape of Curator's LeaderSelector with
// autoRequeue: until ctx ends, it campaigns with value (Election.Campaign),
// runs fn while the caller leads, resigns when fn returns or leadership is
// lost (the leader's znode is deleted, or left to the engine's cleanup when
// ownership was already lost), backs off, and campaigns again.
//
// It is leader.Run, the same loop over any recipe.Lock, with the campaign
// as the lock, the Election's backoff (WithBackOff) and logger
// (WithLogger), and ErrCampaigning among the errors that end it; see
// leader.Run for fn's context (done when leadership ends or is in doubt, or
// when ctx ends; context.Cause tells which), the backoff, and the logs.
// Leadership is a lease: guard every effect with the token at the resource
// (fence.Guard), which rejects a late write of a former leader.
//
// Run always returns a non-nil error. When the caller stops it by ending
// ctx, that error is context.Cause(ctx), returned after fn (if running) has
// returned and leadership was given up; Run leaves no znode behind. That
// is a normal stop, not a failure, as http.ErrServerClosed is from
// http.Server.Serve: bad arguments aside (reported at once), whenever ctx
// is done as Run returns, the error is ctx's cause, so
//
//	if err := election.Run(ctx, e, value, fn); ctx.Err() == nil {
//		return fmt.Errorf("leader loop: %w", err) // a real failure
//	}
//
// Run returns earlier, with the error, only when going on is pointless:
// ErrCampaigning (the Election is already campaigning or leading: use one
// Election per Run), or a campaign error that retrying cannot cure
// (recipe.Permanent): recipe.ErrMixedRecipes (the directory holds another
// recipe's nodes, e.g. a mutex's; met by two campaigns in a row, the second
// after the backoff, as leader.Run says), recipe.ErrNoPermission (an ACL
// refusal), recipe.ErrTooLarge and recipe.ErrBadOption (value too large,
// nil e or fn), recipe.ErrSessionClosed (the session was closed). Any other
// campaign error (recipe.ErrSessionLost, recipe.ErrNodeDeleted when the
// directory was deleted, a connection failure) is logged and retried.
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
	return leader.Run(ctx, candidate{e, value}, fn, leader.WithBackOff(e.backoff),
		leader.WithLogger(e.log.With("dir", recipe.ShortPath(e.Path()))), leader.WithPermanent(ErrCampaigning))
}

// candidate is e campaigning with value, as the recipe.Lock of leader.Run:
// a grant is a leadership, and its Release is Resign's.
type candidate struct {
	e     *Election
	value []byte
}

func (c candidate) Acquire(ctx context.Context) (recipe.Lease, error) {
	return c.e.Campaign(ctx, c.value)
}

func (c candidate) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return c.e.TryCampaign(ctx, c.value)
}

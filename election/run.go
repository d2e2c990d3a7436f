package election

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Run is the leader-gated loop (Curator's LeaderSelector with autoRequeue):
// leader.Run over e's campaign for value, with e's backoff and logger. Until
// ctx ends it campaigns, runs fn with the token and a context that ends when
// leadership ends or is in doubt, resigns when fn returns, backs off, and
// campaigns again. It always returns a non-nil error: context.Cause(ctx) once
// ctx ends (a normal stop, after fn returned and leadership was given up:
// no znode is left), or earlier ErrCampaigning or a campaign error that
// retrying cannot cure (recipe.Permanent; recipe.ErrMixedRecipes when met
// twice in a row); other campaign errors are logged and retried. Bad
// arguments: recipe.ErrBadOption (nil e or fn), recipe.ErrTooLarge (value).
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
	return leader.Run(ctx, candidate{e, value}, fn, leader.WithBackOff(e.backoff), leader.WithOnReturn(leader.RequeueWithBackOff()),
		leader.WithLogger(e.log.With("dir", shortpath.Of(e.Path()))), leader.WithPermanent(ErrCampaigning), leader.WithHealth(e.health))
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

package leader

import "time"

// DefaultRequeuePause is the pause of Run's default OnReturn,
// Requeue(DefaultRequeuePause): after fn returns while still leading, Run
// waits this long before it campaigns again, about one term a second per
// candidate at most (see Why a requeue pause in the package documentation).
const DefaultRequeuePause = time.Second

// OnReturn is what Run does when fn returns early: while Run still leads,
// that is with fn's context live (neither lost nor stopped by Run's ctx).
// Build one with Requeue or Stop and pass it to WithOnReturn; the zero
// OnReturn{} is Run's default, Requeue(DefaultRequeuePause) (not
// Requeue(0), which would campaign again at once: churn). A return after
// the context ended is not early: Run campaigns again after a loss, and
// returns once its ctx ended, whatever the OnReturn.
type OnReturn struct {
	set     bool // built by Requeue, RequeueWithBackOff or Stop: the zero value is the default
	stop    bool
	backoff bool // RequeueWithBackOff
	pause   time.Duration
}

// Requeue releases the lock when fn returns early and campaigns again after
// pause (0: at once), giving other candidates the lock meanwhile: Curator's
// LeaderSelector with autoRequeue. An error fn returns early is logged at
// warning level and waits the (growing) backoff of WithBackOff instead of
// pause. A negative pause makes Run return recipe.ErrBadOption.
func Requeue(pause time.Duration) OnReturn { return OnReturn{set: true, pause: pause} }

// RequeueWithBackOff is Requeue with, for pause, the first interval of
// Run's backoff (WithBackOff: reset, then its next interval): Run's pace
// before DefaultRequeuePause, for a caller that paces its loop with its own
// backoff. election.Run uses it, and so keeps its documented pace (and the
// nemesis its rate of handovers).
func RequeueWithBackOff() OnReturn { return OnReturn{set: true, backoff: true} }

// Stop releases the lock when fn returns early and ends Run, which returns
// what fn returned (nil, or fn's error, not logged): Curator's
// LeaderSelector without autoRequeue, for a fn that does one job under the
// lock, once. fn's context ending first (a loss, Run's ctx) still makes Run
// campaign again, or return ctx's cause: fn did not finish while leading.
func Stop() OnReturn { return OnReturn{set: true, stop: true} }

// WithOnReturn sets what Run does when fn returns early (see OnReturn).
// Default, also for the zero OnReturn{}: Requeue(DefaultRequeuePause).
func WithOnReturn(r OnReturn) Option {
	return func(c *config) {
		if !r.set {
			r = Requeue(DefaultRequeuePause)
		}
		c.onReturn = r
	}
}

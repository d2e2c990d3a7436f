package nemesis

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// FaultPauseClient freezes a holder past the session timeout T: its proxy
// blackholed for 1.2 to 2 T and its hold stalled for the same time, after
// which it writes without looking at its lease's context (a GC or VM pause
// as the fenced resource sees it). The engine aims it at a client that
// holds a grant when one does.
const FaultPauseClient = "pause-client"

// GenericFaults are the client faults the engine injects on every Target
// through each client's FaultProxy.
var GenericFaults = []string{FaultCut, FaultBlackhole, FaultLatency, FaultPauseClient}

// LockRecipe is any Client.Lock under the nemesis: Acquire, hold,
// Release. On ZooKeeper it is Mutex (Client.Lock is mutex.New).
func LockRecipe() Recipe {
	return Recipe{
		Name: "mutex", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			l, err := c.Lock(dir)
			if err != nil {
				return nil, err
			}
			return lockParticipant{pick: func(*rand.Rand) (Role, recipe.Lock) { return RoleHolder, l }}, nil
		},
	}
}

// LeaderRecipe is leader.Run over Client.Lock: the leader function is the
// hold. Run retries fast (10 to 200 ms) and quietly.
func LeaderRecipe() Recipe {
	return Recipe{
		Name: "leader", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			l, err := c.Lock(dir)
			if err != nil {
				return nil, err
			}
			return leaderParticipant{l: l}, nil
		},
	}
}

type leaderParticipant struct{ l recipe.Lock }

func (p leaderParticipant) Run(ctx context.Context, _ *rand.Rand, hold func(Held), failed func(time.Time, error)) error {
	asked := time.Now()
	lock := failingLock{Lock: p.l, failed: failed}
	return leader.Run(ctx, lock, func(lctx context.Context, token fence.Token) error {
		hold(Held{Role: RoleLeader, Token: token, Ctx: lctx, Asked: asked})
		asked = time.Now() // Run acquires again after fn returns
		return nil
	}, leader.WithLogger(slog.New(slog.DiscardHandler)), leader.WithBackOff(runBackOff))
}

// failingLock reports each Acquire that failed while Run still wanted it,
// so that the history shows what a client did while nobody was granted.
type failingLock struct {
	recipe.Lock
	failed func(time.Time, error)
}

func (l failingLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	asked := time.Now()
	lease, err := l.Lock.Acquire(ctx)
	if err != nil && ctx.Err() == nil {
		l.failed(asked, err)
	}
	return lease, err
}

// MultiLockRecipe is a multi-lock (package multilock) over two Client.Locks
// beside plain grants of one of them: half the grants are the multi-lock
// over dir and dir+"-b", taken b first (the keys' order), so that a grant
// may hold b while it waits for dir; the others are Client.Lock(dir) alone.
// Every grant holds dir, so at most one is live, and writes are fenced with
// dir's token. On ZooKeeper the leftovers checked are dir's.
func MultiLockRecipe() Recipe {
	return Recipe{
		Name: "multilock", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			a, err := c.Lock(dir)
			if err != nil {
				return nil, err
			}
			b, err := c.Lock(dir + "-b")
			if err != nil {
				return nil, err
			}
			m, err := multilock.New(multilock.Part{Key: "1:" + dir, Lock: a}, multilock.Part{Key: "0:" + dir + "-b", Lock: b})
			if err != nil {
				return nil, err
			}
			both := multiLock{m: m, key: "1:" + dir}
			return lockParticipant{pick: func(rng *rand.Rand) (Role, recipe.Lock) {
				if rng.IntN(2) == 0 {
					return RoleHolder, both
				}
				return RoleHolder, a
			}}, nil
		},
	}
}

// multiLock is a multi-lock as the workload's recipe.Lock: a grant's
// token is the part key's.
type multiLock struct {
	m   *multilock.Lock
	key string
}

func (l multiLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	g, err := l.m.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return multiLease{g, l.key}, nil
}

func (l multiLock) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	g, err := l.m.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return multiLease{g, l.key}, nil
}

type multiLease struct {
	*multilock.Lease
	key string
}

func (l multiLease) Token() fence.Token { return l.Lease.Token(l.key) }

package nemesis

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Recipe adapts one recipe to the workload. Adding a recipe is one value of
// this type.
type Recipe struct {
	// Name names the recipe in reports and in the directory path.
	Name string
	// Allowed says which sets of live grants the recipe permits.
	Allowed Allowed
	// Fenced says whether grants of a role write to the fenced registers
	// (readers and semaphore permits only take samples).
	Fenced func(Role) bool
	// Open makes client c's participant over dir (the name the run
	// locks). ZooKeeper's own recipes need ZooKeeper's client.
	Open func(c Client, dir string) (Participant, error)
}

// Participant takes grants until ctx ends: for each grant it calls hold,
// which returns when the holder is done, and then gives the grant up. It
// calls failed for each attempt that ended without a grant (asked is when
// the attempt began), so that the history shows what a client did while
// nobody was granted.
type Participant interface {
	Run(ctx context.Context, rng *rand.Rand, hold func(Held), failed func(asked time.Time, err error)) error
}

// Held is one grant handed to the workload.
type Held struct {
	Role  Role
	Token fence.Token
	Ctx   context.Context // the lease's context
	Asked time.Time       // when the grant was asked for
}

// acquireTimeout bounds one Acquire, so that cancellation paths run too.
const acquireTimeout = 4 * time.Second

// lockParticipant runs any recipe.Lock: Acquire, hold, Release.
type lockParticipant struct {
	pick func(rng *rand.Rand) (Role, recipe.Lock)
}

func (p lockParticipant) Run(ctx context.Context, rng *rand.Rand, hold func(Held), failed func(time.Time, error)) error {
	for ctx.Err() == nil {
		role, l := p.pick(rng)
		asked := time.Now()
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		lease, err := l.Acquire(actx)
		cancel()
		if err != nil {
			failed(asked, err)
			pause(ctx, 20*time.Millisecond+time.Duration(rng.IntN(80))*time.Millisecond)
			continue
		}
		hold(Held{Role: role, Token: lease.Token(), Ctx: lease.Context(), Asked: asked})
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = lease.Release(rctx) // ErrLeaseLost after a revocation; the cleaner handles the rest
		cancel()
		pause(ctx, time.Duration(rng.IntN(10))*time.Millisecond)
	}
	return context.Cause(ctx)
}

// pause waits d, or until ctx ends (loop.Sleep, its cause not needed).
func pause(ctx context.Context, d time.Duration) { _ = loop.Sleep(ctx, d) }

func always(Role) bool { return true }

// Mutex is the exclusive lock (mutex.New).
func Mutex() Recipe {
	return Recipe{
		Name: "mutex", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			m, err := mutex.New(s, dir)
			if err != nil {
				return nil, err
			}
			return lockParticipant{pick: func(*rand.Rand) (Role, recipe.Lock) { return RoleHolder, m }}, nil
		},
	}
}

// RWLock is the read-write lock (mutex.NewRW): each grant is a write with
// probability 1/2, else a read. Writers write the registers; readers only
// take samples, which must never show a writer live beside them.
func RWLock() Recipe {
	return Recipe{
		Name: "rwlock", Allowed: ReadersOrOneWriter, Fenced: func(r Role) bool { return r == RoleWriter },
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			rw, err := mutex.NewRW(s, dir)
			if err != nil {
				return nil, err
			}
			return lockParticipant{pick: func(rng *rand.Rand) (Role, recipe.Lock) {
				if rng.IntN(2) == 0 {
					return RoleWriter, rw.WriteLock()
				}
				return RoleReader, rw.ReadLock()
			}}, nil
		},
	}
}

// Semaphore is the counting semaphore of n permits (mutex.NewSemaphore).
// Concurrent holders have different tokens, so a single highest-token fence
// would refuse legitimate holders (docs/recipes.md): holders take samples
// only, and the ≤ n invariant is checked from them.
func Semaphore(n int) Recipe {
	return Recipe{
		Name: "semaphore", Allowed: AtMost(n), Fenced: func(Role) bool { return false },
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			sem, err := mutex.NewSemaphore(s, dir, n)
			if err != nil {
				return nil, err
			}
			return lockParticipant{pick: func(*rand.Rand) (Role, recipe.Lock) { return RolePermit, sem }}, nil
		},
	}
}

// StoredSemaphore is the semaphore whose limit n is stored with its
// directory: each grant is taken at random by a NewSemaphore with
// StoredLimit (the first stores n) or by an OpenSemaphore, which follows
// the stored n. Checked as Semaphore: at most n holders.
func StoredSemaphore(n int) Recipe {
	return Recipe{
		Name: "stored-semaphore", Allowed: AtMost(n), Fenced: func(Role) bool { return false },
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			fixed, err := mutex.NewSemaphore(s, dir, n, mutex.StoredLimit())
			if err != nil {
				return nil, err
			}
			open, err := mutex.OpenSemaphore(s, dir)
			if err != nil {
				return nil, err
			}
			return lockParticipant{pick: func(rng *rand.Rand) (Role, recipe.Lock) {
				if rng.IntN(2) == 0 {
					return RolePermit, fixed
				}
				return RolePermit, open
			}}, nil
		},
	}
}

// Election is the leader election, driven by election.Run: the leader
// function is the hold.
func Election() Recipe {
	return Recipe{
		Name: "election", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			e, err := election.New(s, dir, election.WithLogger(slog.New(slog.DiscardHandler)), election.WithBackOff(runBackOff))
			if err != nil {
				return nil, err
			}
			return electionParticipant{e: e}, nil
		},
	}
}

func runBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 10 * time.Millisecond
	b.MaxInterval = 200 * time.Millisecond
	b.MaxElapsedTime = 0
	return b
}

type electionParticipant struct{ e *election.Election }

func (p electionParticipant) Run(ctx context.Context, _ *rand.Rand, hold func(Held), _ func(time.Time, error)) error {
	asked := time.Now()
	return election.Run(ctx, p.e, []byte("nemesis"), func(lctx context.Context, token fence.Token) error {
		hold(Held{Role: RoleLeader, Token: token, Ctx: lctx, Asked: asked})
		asked = time.Now() // Run campaigns again after fn returns
		return nil
	})
}

// Latch is the leader latch (latch.New, Start, Await): a participant joins,
// awaits leadership, holds it while the workload writes with the grant's
// token, and gives it up by closing the latch (Close is final, so the next
// round joins with a new Latch, behind everyone already waiting).
func Latch() Recipe {
	return Recipe{
		Name: "latch", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			return latchParticipant{s: s, dir: dir}, nil
		},
	}
}

type latchParticipant struct {
	s   *zookeeper.Session
	dir string
}

func (p latchParticipant) Run(ctx context.Context, rng *rand.Rand, hold func(Held), failed func(time.Time, error)) error {
	for ctx.Err() == nil {
		l, err := latch.New(p.s, p.dir, "nemesis", latch.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		asked := time.Now() // a re-join after a session loss creates a later node: asked stays conservative
		sctx, cancel := context.WithTimeout(ctx, acquireTimeout)
		err = l.Start(sctx)
		cancel()
		if err != nil {
			failed(asked, err)
		}
		for err == nil && ctx.Err() == nil {
			actx, cancel := context.WithTimeout(ctx, acquireTimeout)
			lease, aerr := l.Await(actx)
			cancel()
			if aerr == nil {
				hold(Held{Role: RoleLeader, Token: lease.Token(), Ctx: lease.Context(), Asked: asked})
				break
			}
			failed(asked, aerr)
			if errors.Is(aerr, latch.ErrClosed) || errors.Is(aerr, latch.ErrNotStarted) || errors.Is(aerr, recipe.ErrSessionClosed) {
				break
			}
			// Await timed out: the latch keeps its place and waits on.
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.Close(cctx) // gives leadership up; the cleaner finishes a delete that fails here
		cancel()
		if err != nil {
			pause(ctx, 20*time.Millisecond+time.Duration(rng.IntN(80))*time.Millisecond)
		} else {
			pause(ctx, time.Duration(rng.IntN(10))*time.Millisecond)
		}
	}
	return context.Cause(ctx)
}

// Broken is a deliberately wrong recipe for proving the checker: it claims
// to be a mutex but is a semaphore of two permits, so two holders can be
// live at once.
func Broken() Recipe {
	r := Semaphore(2)
	r.Name, r.Allowed, r.Fenced = "broken-mutex", AtMost(1), always
	return r
}

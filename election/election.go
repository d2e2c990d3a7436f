// Package election provides fenced leader election on ZooKeeper with the
// API of etcd's concurrency.Election (Campaign, TryCampaign, Resign, Leader,
// Observe) and Run, the leader-gated loop most programs want. Every
// leadership is a recipe.Lease: its Token (the winning znode's czxid) is
// larger than every earlier leader's, and its Context ends the moment
// leadership is in doubt. A leader that pauses can resume after another was
// elected: guard its effects with the token (package fence).
//
//	e, err := election.New(s, "/services/scheduler")
//	err = election.Run(ctx, e, []byte("host-a:8080"), func(ctx context.Context, token fence.Token) error {
//		return schedule(ctx, token) // ctx ends when leadership does
//	})
//	if ctx.Err() == nil { // else err is context.Cause(ctx): a normal stop
//		return fmt.Errorf("leader loop: %w", err) // a real failure
//	}
//
// The recipe is the ZooKeeper recipes page's "Leader Election", as Curator's
// LeaderSelector implements it, on the engine of package mutex, with its
// guarantees and permissions (docs/recipes.md#leader-election-electionnew-electionrun).
package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of election znodes ("_c_<guid>-elect-<sequence>").
const Kind = "elect-"

// Errors of this package. Every other error matches a sentinel of package
// recipe (or ctx's cause).
var (
	// ErrNoLeader is returned by Leader when the directory is empty or missing.
	ErrNoLeader = errors.New("election: no leader")

	// ErrCampaigning is returned by Campaign and Run while the Election has a
	// campaign in progress or a live leadership: use one Election per candidate.
	ErrCampaigning = errors.New("election: a campaign is in progress or leadership is held")

	// ErrNotLeader is returned by Proclaim when the Election holds no live
	// leadership.
	ErrNotLeader = errors.New("election: not leading")
)

// Election is one candidate's handle on an election directory. It campaigns
// for one leadership at a time; Leader, Observe and Participants work at any
// time, also without campaigning. Safe for concurrent use.
type Election struct {
	q       *zookeeper.Queue
	path    string
	log     *slog.Logger
	backoff func() backoff.BackOff
	health  *leader.Health // WithHealth; nil: none

	proclaim    sync.Mutex // serializes Proclaims
	mu          sync.Mutex
	campaigning bool         // a Campaign call is in progress
	lease       recipe.Lease // the last leadership granted, until Resign confirms its end
}

// Option configures New.
type Option func(*Election)

// WithLogger sets the logger Run uses for failed campaigns and errors
// returned by the leader function (default: the Session's logger,
// zookeeper.WithLogger). A nil logger means the default.
func WithLogger(l *slog.Logger) Option { return func(e *Election) { e.log = l } }

// WithBackOff sets the backoff between Run's campaigns, as
// leader.WithBackOff does for leader.Run (default: exponential from 100 ms
// to MaxRunBackOff, ±50 %). A nil newBackOff means the default.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return func(e *Election) { e.backoff = newBackOff }
}

// WithHealth reports Run's leaderships to h, as leader.WithHealth does for
// leader.Run: h's liveness check fails while Run's function outlives its
// leadership by more than h's tolerance. Nil means none.
func WithHealth(h *leader.Health) Option { return func(e *Election) { e.health = h } }

// Leader describes the current leader: the first node of the directory.
type Leader struct {
	// Value is the data the leader gave to Campaign.
	Value []byte
	// Token is the czxid of its znode, the same as its Lease's Token.
	Token fence.Token
	// SessionID is the ZooKeeper session that owns the leader's znode.
	SessionID int64
	// Node is the name of its znode (a child of the election directory).
	Node string
	// Created is its znode's ctime (server clock, millisecond precision):
	// when its campaign began, not when it became leader.
	Created time.Time
}

// Observation is one state of the election reported by Observe.
type Observation struct {
	// Present is false when nobody leads (the directory is empty or
	// missing); Leader is then the zero value.
	Present bool
	// Leader is the leader when Present.
	Leader Leader
}

// String describes o: "no leader" or "leader <token> (<node>)".
func (o Observation) String() string {
	if !o.Present {
		return "no leader"
	}
	return fmt.Sprintf("leader %v (%s)", o.Leader.Token, o.Leader.Node)
}

// New returns an Election over the directory path on session s, without
// any ZooKeeper operation; the directory is created on first use, and again
// whenever it was deleted (case C17). Errors: as mutex.New.
func New(s *zookeeper.Session, path string, opts ...Option) (*Election, error) {
	q, err := zookeeper.NewQueue(s, path, []string{Kind}, zookeeper.FirstHolds, zookeeper.GrantsLowest())
	if err != nil {
		return nil, err
	}
	e := &Election{q: q, path: path}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	if e.log == nil {
		e.log = zkside.SessionOf(s).Logger()
	}
	return e, nil
}

// MaxRunBackOff is the longest wait of Run's default backoff, and the wait
// when a policy of WithBackOff returns backoff.Stop: leader.MaxBackOff.
const MaxRunBackOff = leader.MaxBackOff

// Path returns the election directory (relative to the session's chroot).
func (e *Election) Path() string { return e.path }

// Campaign joins the election with a znode carrying value and blocks until
// the caller leads (FIFO), ctx ends, or leadership can no longer be
// obtained: etcd's Campaign, with a mutex's ZooKeeper operations. The Lease
// is the leadership: Token is the znode's czxid; Context ends when
// leadership ends or is in doubt (recipe.ErrReleased, ErrSuspended: the node
// is then deleted on reconnection, campaign again; ErrSessionLost,
// ErrSessionClosed, ErrNodeDeleted). Errors: ErrCampaigning; ctx's cause (no
// node left behind, within 500 ms after ctx ends); recipe.ErrTooLarge (and
// recipe.ErrBadOption over zookeeper.MaxNodeData) for a value that does not
// fit; else as mutex.Mutex.Acquire.
func (e *Election) Campaign(ctx context.Context, value []byte) (recipe.Lease, error) {
	return e.campaign(ctx, value, true)
}

// TryCampaign is Campaign without waiting, as mutex.Mutex.TryAcquire: the
// caller leads only if no candidate is ahead of its node, else the node is
// deleted and the error matches recipe.ErrLocked. With Campaign it makes an
// Election a recipe.Lock (testkit/locktest). Errors: as Campaign.
func (e *Election) TryCampaign(ctx context.Context, value []byte) (recipe.Lease, error) {
	return e.campaign(ctx, value, false)
}

func (e *Election) campaign(ctx context.Context, value []byte, wait bool) (recipe.Lease, error) {
	if err := e.q.CheckNodeData(value); err != nil {
		return nil, fmt.Errorf("campaign value: %w", err)
	}
	e.mu.Lock()
	if e.campaigning || (e.lease != nil && e.lease.Context().Err() == nil) {
		e.mu.Unlock()
		return nil, ErrCampaigning
	}
	e.campaigning = true
	e.mu.Unlock()

	var l recipe.Lease
	var err error
	if wait {
		l, err = e.q.Acquire(ctx, Kind, value)
	} else {
		l, err = e.q.TryAcquire(ctx, Kind, value)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	e.campaigning = false
	if err != nil {
		return nil, err
	}
	e.lease = l
	return l, nil
}

// Resign gives up the leadership of the last Campaign (etcd's Resign): it
// releases that lease (cause recipe.ErrReleased), deleting the znode so that
// the next candidate leads. It returns nil when e does not lead (it never
// campaigned, resigned already, or lost leadership: a surviving node is the
// engine's to remove), and does not stop a Campaign in progress (cancel its
// ctx). Errors: an *recipe.OpError when the delete could not be confirmed
// (call Resign again), matching recipe.ErrNoPermission on ACL refusals.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	err := l.Release(ctx)
	if errors.Is(err, recipe.ErrLeaseLost) {
		err = nil
	}
	if err == nil {
		e.mu.Lock()
		if e.lease == l {
			e.lease = nil
		}
		e.mu.Unlock()
	}
	return err
}

// Proclaim publishes value as the leader's without another election
// (etcd's Proclaim): it writes the leadership's znode, so Leader and
// Observe report the new value. Proclaims are serialized; each writes at
// the node's current version. Errors: ErrNotLeader without a live
// leadership; recipe.ErrLeaseLost when it ended meanwhile;
// recipe.ErrTooLarge; *recipe.OpError; ctx's cause (the write may have
// applied: Proclaim again settles it).
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	e.proclaim.Lock()
	defer e.proclaim.Unlock()
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil || l.Context().Err() != nil {
		return ErrNotLeader
	}
	return e.q.SetLeaseData(ctx, l, value)
}

// Leader returns the current leader, the first node of the directory
// (getChildren, then getData of that node), whoever created it; a suspended
// leader, whose lease has ended, is reported until its znode goes. Errors:
// ErrNoLeader for an empty or missing directory; else as Participants.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	h, err := e.q.Head(ctx)
	if err != nil {
		return Leader{}, err
	}
	if !h.Present {
		return Leader{}, ErrNoLeader
	}
	return leaderOf(h.Node), nil
}

func leaderOf(p zookeeper.Participant) Leader {
	return Leader{Value: p.Data, Token: p.Token, SessionID: p.SessionID, Node: p.Name, Created: p.Created}
}

// Participants lists the candidates, the leader first, as
// mutex.Mutex.Participants (same operations and errors).
func (e *Election) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return e.q.Participants(ctx)
}

// Package election provides fenced leader election on ZooKeeper, with
// explicit campaigning in the style of etcd's concurrency.Election.
//
// The recipe is the "Leader Election" recipe of the ZooKeeper recipes page
// (https://zookeeper.apache.org/doc/current/recipes.html#sc_leaderElection),
// as Apache Curator's LeaderSelector implements it: each candidate creates an
// ephemeral sequential znode under the election directory and watches only
// its immediate predecessor; the lowest node is the leader. It is driven by
// the queue engine of package recipe (zookeeper.Queue with zookeeper.FirstHolds),
// so it shares every guarantee of package mutex: protected node names, no
// node left behind by an error or a cancellation, missing directories
// re-created (case C17), and leadership bound to the session.
//
// The API is etcd's, with one difference that matters: every grant of
// leadership is a recipe.Lease. Its Token is the czxid of the node that won,
// larger than every earlier leader's token, and its Context is cancelled the
// moment leadership is in doubt (connection SUSPENDED under the session's
// suspend policy, session lost, node deleted, Resign). A leader is a lease
// holder, not a certainty: a process that pauses can resume after another
// leader was elected. Guard every effect of leadership with the token at
// the resource (package fence).
//
//   - Campaign blocks until the caller leads; TryCampaign leads only if no
//     candidate is ahead (else recipe.ErrLocked); Resign gives leadership up.
//   - Leader tells who leads now (typed error ErrNoLeader when nobody does).
//   - Observe reports every leader change and the no-leader state (case
//     C16), coalescing for slow readers but always ending on the latest state.
//   - Run is the loop most programs want: campaign, run a function while
//     leading with a context that ends when leadership ends, campaign again.
//
// Permissions: as package mutex (CREATE and DELETE on the election directory).
// Foreign children of the directory are ignored unless they imitate this
// package's node names exactly; another recipe's nodes of this module make
// Campaign fail with recipe.ErrMixedRecipes. Keep the directory for the
// election.
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
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of election znodes: their names are
// "_c_<guid>-elect-<sequence>".
const Kind = "elect-"

// Errors of this package. Every other error matches a sentinel of package
// recipe (or ctx's cause).
var (
	// ErrNoLeader is returned by Leader when the election has no candidate
	// (its directory is empty or missing).
	ErrNoLeader = errors.New("election: no leader")

	// ErrCampaigning is returned by Campaign (and by Run) when the Election
	// already has a campaign in progress or holds a live leadership: one
	// *Election campaigns for one leadership at a time. Resign (or the end of
	// the leadership) makes Campaign possible again. Use one Election per
	// concurrent candidate.
	ErrCampaigning = errors.New("election: a campaign is in progress or leadership is held")
)

// Election is one candidate's handle on the election rooted at one znode
// path. It campaigns for one leadership at a time (Campaign, then Resign);
// Leader, Observe and Participants can be called at any time, concurrently,
// also by a handle that never campaigns. An Election is safe for concurrent
// use.
type Election struct {
	q       *zookeeper.Queue
	log     *slog.Logger
	backoff func() backoff.BackOff

	mu          sync.Mutex
	campaigning bool         // a Campaign call is in progress
	lease       recipe.Lease // the last leadership granted, until Resign confirms its end
}

// Option configures New.
type Option func(*Election)

// WithLogger sets the logger Run uses for failed campaigns and errors
// returned by the leader function (default: the Session's logger,
// zookeeper.Session.Logger). A nil logger means the default.
func WithLogger(l *slog.Logger) Option { return func(e *Election) { e.log = l } }

// WithBackOff sets the backoff Run waits between campaigns: after a failed
// campaign, after a leader function that returned an error, and (reset first)
// after every other end of leadership. newBackOff is called once per Run
// call. The policy never ends Run (ctx does, or an error that retrying cannot
// cure: see Run): when it returns backoff.Stop, Run waits MaxRunBackOff.
// Default: exponential from 100 ms to MaxRunBackOff, randomized by ±50 %,
// without a total limit. A nil newBackOff means the default.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return func(e *Election) { e.backoff = newBackOff }
}

// Leader describes the current leader: the first node of the election
// directory.
type Leader struct {
	// Value is the data the leader gave to Campaign.
	Value []byte
	// Token is the leader's fencing token: the czxid of its znode, the same
	// value as its Lease's Token.
	Token fence.Token
	// SessionID is the ZooKeeper session that owns the leader's znode.
	SessionID int64
	// Node is the name of the leader's znode (a child of the election
	// directory).
	Node string
	// Created is when the leader's znode was created (its ctime, server
	// clock, millisecond precision): when its campaign began, not when it
	// became leader.
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

// String describes the observation, e.g. "no leader" or
// "leader 4294967301 (_c_…-elect-0000000003)".
func (o Observation) String() string {
	if !o.Present {
		return "no leader"
	}
	return fmt.Sprintf("leader %v (%s)", o.Leader.Token, o.Leader.Node)
}

// New returns an Election over the election directory path on session s.
// The path is relative to the session's chroot. New performs no ZooKeeper
// operation; the directory (and missing parents) is created as container
// znodes on first use, and again whenever it was deleted (case C17).
//
// Errors: a *zookeeper.PathError (matching recipe.ErrInvalidPath) for "",
// relative paths, "/", a trailing slash, empty or dot segments, characters
// ZooKeeper refuses, the /zookeeper subtree, and a path too long for the
// session's packet limit (matching recipe.ErrTooLarge too: see
// zookeeper.WithMaxPacket); recipe.ErrBadOption for a nil session;
// recipe.ErrSessionClosed.
func New(s *zookeeper.Session, path string, opts ...Option) (*Election, error) {
	q, err := zookeeper.NewQueue(s, path, []string{Kind}, zookeeper.FirstHolds, zookeeper.GrantsLowest())
	if err != nil {
		return nil, err
	}
	e := &Election{q: q}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	if e.log == nil {
		e.log = s.Logger()
	}
	return e, nil
}

// MaxRunBackOff is the longest wait of Run's default backoff, and the wait
// when a policy of WithBackOff returns backoff.Stop: leader.MaxBackOff.
const MaxRunBackOff = leader.MaxBackOff

// Path returns the election directory (relative to the session's chroot).
func (e *Election) Path() string { return e.q.Dir() }

// Campaign joins the election with a znode carrying value and blocks until
// the caller is the leader, ctx ends, or leadership can no longer be
// obtained. Candidates are served in the order they joined. It is etcd's
// (*concurrency.Election).Campaign, on the recipe page's ephemeral
// sequential "guid-n_" node (named "_c_<guid>-elect-<sequence>" here).
//
// The returned Lease is the leadership: its Token is the czxid of the
// caller's znode (larger than every earlier leader's token), and its Context
// is done as soon as leadership ends or is in doubt, with context.Cause
// telling why: recipe.ErrReleased (Resign or Lease.Release),
// recipe.ErrSuspended (the connection was SUSPENDED: by default at once, see
// zookeeper.WithSuspendPolicy; the node is then deleted on reconnection, and
// the caller must Campaign again), recipe.ErrSessionLost,
// recipe.ErrSessionClosed, recipe.ErrNodeDeleted (someone deleted the node
// or the whole directory). The Election remembers the lease for Resign.
//
// One campaign at a time per Election: while a Campaign is in progress or
// its leadership is live, Campaign returns ErrCampaigning. Once the
// leadership has ended (Resign, or lost), Campaign may be called again.
// The ZooKeeper operations are a mutex's: docs/design.md#acquisition.
//
// Errors: ctx's cause (no node is left behind: case C5; Campaign can take up
// to 500 ms past ctx's end to make sure of that when the server does not
// answer: 250 ms for a create in flight, 250 ms for the delete); recipe.ErrBadOption and recipe.ErrTooLarge when value is longer
// than zookeeper.MaxNodeData, recipe.ErrTooLarge when it is too large for the
// session's packet limit with the path; ErrCampaigning;
// recipe.ErrSessionLost; recipe.ErrNodeDeleted (the node vanished while
// waiting, e.g. the directory was deleted: campaign again);
// recipe.ErrSessionClosed; recipe.ErrMixedRecipes; *recipe.OpError
// (matching recipe.ErrNoPermission on ACL refusals). No error leaves a node
// behind.
func (e *Election) Campaign(ctx context.Context, value []byte) (recipe.Lease, error) {
	return e.campaign(ctx, value, true)
}

// TryCampaign is Campaign without waiting: the caller leads only if its
// node is the first of the directory on the first listing after its create
// (no candidate was ahead of it); otherwise the node is deleted and the
// error matches recipe.ErrLocked. A "not leader" answer leaves no node, also
// across a connection blip. It is zookeeper.Queue.TryAcquire, as
// mutex.(*Mutex).TryAcquire is; it gives the election a non-blocking
// recipe.Lock (with Campaign as Acquire), which is what the conformance
// suite (recipe/locktest) needs. Checking Leader first and campaigning
// when it reports ErrNoLeader is no substitute: another candidate can join
// in between, and Campaign would then wait. Errors: as Campaign, and
// recipe.ErrLocked.
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

// Resign gives up the leadership granted by the last Campaign (etcd's
// Resign; Curator's LeaderSelector does it when takeLeadership returns): it
// is recipe.Lease.Release of that lease, which ends the lease's Context
// (cause recipe.ErrReleased) and deletes the leader's znode, so the next
// candidate leads.
//
// Resign returns nil, doing nothing, when the Election does not lead: it
// never campaigned, it already resigned, or its leadership was already lost
// (context.Cause of the lease's Context says why; the engine removes a
// surviving node by itself). It does not stop a Campaign in progress: cancel
// that Campaign's ctx instead. After Resign, Campaign may be called again.
//
// Errors: Release's, except recipe.ErrLeaseLost: an *recipe.OpError when the
// delete could not be confirmed (call Resign again: it returns nil once the
// node is gone), matching recipe.ErrNoPermission when the ACL forbids it.
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

// Leader returns the current leader: the first node of the election
// directory, whoever created it (etcd's Leader, Curator's getLeader). A
// leader whose connection is SUSPENDED has already given up (its lease
// ended) but is reported until its znode goes (its session expires, or it
// reconnects and the node is deleted).
//
// ZooKeeper operations: getChildren, then getData of the first node.
// Errors: ErrNoLeader when the directory is empty or missing;
// recipe.ErrMixedRecipes when it holds another recipe's nodes;
// *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
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

// Participants lists the candidates in order: the first is the leader, the
// others follow in the order they will lead. ZooKeeper operations:
// getChildren, then getData per znode. A missing directory gives an empty
// list. Errors: recipe.ErrMixedRecipes when the directory holds another
// recipe's nodes; *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (e *Election) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return e.q.Participants(ctx)
}

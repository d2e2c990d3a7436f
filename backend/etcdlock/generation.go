package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// generation is one etcd lease of a Session and the keep-alive loop that
// renews it.
type generation struct {
	s   *Session
	id  clientv3.LeaseID
	ttl time.Duration // as granted
	// ctx is done when the lease is lost, after the loss was reported; its
	// cause says why (matching recipe.ErrSessionLost, recipe.ErrSuspended
	// or recipe.ErrSessionClosed).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// dl is the ownership deadline: 2/3 of the TTL after the send of the
	// newest acknowledged grant or keep-alive. The server can't expire the
	// lease before a full TTL after it received that request, which was
	// after we sent it; the last third is the margin for our timer firing
	// late and for clock drift. Set before the generation is published.
	dl *grant.Deadline

	mu     sync.Mutex
	leases map[*lease]struct{} // live grants under this lease, ended by lose

	// Guarded by Session.mu, for SessionState: announced when reported
	// granted, down when lost (a generation lost before it was announced
	// is never reported).
	announced, down bool
}

// current returns the Session's live etcd lease, granting a new one when the
// newest is lost (one grant at a time; concurrent callers share it).
func (s *Session) current(ctx context.Context) (*generation, error) {
	for {
		if s.life.Closed() {
			return nil, recipe.ErrSessionClosed
		}
		s.mu.Lock()
		g := s.gen
		s.mu.Unlock()
		if g != nil {
			if g.live() {
				return g, nil
			}
			<-g.ctx.Done() // lose is reporting the loss: the next grant comes after it
		}
		select {
		case s.granting <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-s.life.Context().Done():
			return nil, recipe.ErrSessionClosed
		}
		s.mu.Lock()
		fresh := s.gen != g
		s.mu.Unlock()
		if fresh { // granted by another caller meanwhile: look again
			<-s.granting
			continue
		}
		g, err := s.newGeneration(ctx)
		<-s.granting
		return g, err
	}
}

// newGeneration grants a new etcd lease and starts keeping it alive.
func (s *Session) newGeneration(ctx context.Context) (*generation, error) {
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	sent, resp, err := s.grant(ctx)
	if err != nil {
		if ctxend.Ended(ctx) {
			return nil, ctxend.Cause(ctx)
		}
		return nil, opError("grant", "", err)
	}
	g := &generation{s: s, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, leases: map[*lease]struct{}{}}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	g.mu.Lock() // an expiry at once (a slow grant) waits for dl in lose
	g.dl = grant.NewDeadline(sent, g.ttl*2/3, g.expire)
	g.mu.Unlock()
	if !s.publish(g) {
		g.lose(recipe.ErrSessionClosed)
		rctx, rcancel := context.WithTimeout(context.Background(), closeTimeout)
		_ = s.revoke(rctx, g)
		rcancel()
		return nil, recipe.ErrSessionClosed
	}
	if !s.life.Go(func() { g.keepAlive(sent) }) {
		g.lose(recipe.ErrSessionClosed) // Close revokes it
	}
	s.log.Debug("etcdlock: lease granted", "lease", fmt.Sprintf("%x", int64(g.id)), "ttl", g.ttl)
	return g, nil
}

// grant asks for a new etcd lease, each try bounded by attemptTimeout and
// sent again while unanswered and ctx lives (a try sent to a silent member
// would otherwise hold the acquisition, without a key, until gRPC closes
// that connection), and returns the answered try's send time.
func (s *Session) grant(ctx context.Context) (time.Time, *clientv3.LeaseGrantResponse, error) {
	for {
		sent := time.Now()
		var resp *clientv3.LeaseGrantResponse
		unanswered, err := try(ctx, attemptTimeout(s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = s.cli.Grant(ctx, int64(s.cfg.ttl/time.Second))
			return err
		})
		if !unanswered {
			return sent, resp, err
		}
		s.log.Debug("etcdlock: lease grant unanswered, sending it again", "error", err)
	}
}

// cleanupTimeout is the configured one, or the granted TTL.
func (g *generation) cleanupTimeout() time.Duration {
	if t := g.s.cfg.cleanupTimeout; t > 0 {
		return t
	}
	return g.ttl
}

// live reports whether the lease is live, ending it if its deadline passed
// (in case the timer has not fired yet).
func (g *generation) live() bool {
	return !g.dl.Check() && g.ctx.Err() == nil
}

// expire is the deadline's: no keep-alive was acknowledged in time.
func (g *generation) expire() {
	g.lose(fmt.Errorf("%w: no keep-alive of etcd lease %x acknowledged within %v of its send",
		recipe.ErrSuspended, int64(g.id), g.ttl*2/3))
}

// bind returns a context done when ctx is or when the lease is lost, with
// the cause of whichever came first.
func (g *generation) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctxend.Also(ctx, g.ctx)
}

// add registers l under the lease, to be ended by its loss, and reports
// whether it did: not when the lease is lost or past its deadline.
func (g *generation) add(l *lease) bool {
	if !g.live() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil {
		return false
	}
	g.leases[l] = struct{}{}
	return true
}

// forget drops l from the lease's grants (it ended by itself).
func (g *generation) forget(l *lease) {
	g.mu.Lock()
	delete(g.leases, l)
	g.mu.Unlock()
}

// lose ends the lease, and every grant under it, with cause (the first
// cause wins), reporting the loss before the context ends. A lease presumed
// lost (recipe.ErrSuspended) may still live on the server: one revoke is
// tried in the background, so that its keys go at once if the server is
// reachable again.
func (g *generation) lose(cause error) {
	g.mu.Lock()
	if g.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	for l := range g.leases { // at once, and before Session.Done is closed
		l.End(cause)
	}
	g.leases = nil
	g.dl.Stop()
	g.s.lost(g, cause)
	g.cancel(cause)
	g.mu.Unlock()
	s := g.s
	s.log.Debug("etcdlock: etcd lease lost", "lease", fmt.Sprintf("%x", int64(g.id)), "cause", cause)
	if errors.Is(cause, recipe.ErrSuspended) {
		s.life.Go(func() { s.revokeLost(g) })
	}
}

// revokeLost revokes the etcd lease of g, presumed lost, until the server
// answers (revoked, or not found) or the Session closes, sending it again
// after transient errors: a client cut off longer than the TTL must not
// leave the lease, and its keys (a member's, a lock's), to the server's
// expiry alone, which every leader change extends by a TTL (the nemesis
// found a member's key kept 5 s past its Leave that way).
func (s *Session) revokeLost(g *generation) {
	ctx, cancel := s.life.Bind(context.Background())
	defer cancel()
	b := loop.BackOff(retryFirst, retryMax)
	for {
		err := s.revoke(ctx, g)
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || !transient(err) || ctx.Err() != nil {
			s.log.Debug("etcdlock: revoke of a lease presumed lost", "lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
			return
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return
		}
	}
}

// revoke revokes g's etcd lease, sending the revoke again after
// attemptTimeout without an answer (to a silent member), until one comes
// or ctx ends.
func (s *Session) revoke(ctx context.Context, g *generation) error {
	for {
		unanswered, err := try(ctx, attemptTimeout(g.ttl), func(ctx context.Context) error {
			_, err := s.cli.Revoke(ctx, g.id)
			return err
		})
		if !unanswered {
			return err
		}
	}
}

// gone asks the server whether the lease still exists, ending it with
// recipe.ErrSessionLost if not, and reports whether it is lost. It tells a
// key deleted by someone else from a key that went with its lease. The
// question is sent with Session.retry.
func (g *generation) gone(ctx context.Context) bool {
	var resp *clientv3.LeaseTimeToLiveResponse
	err := g.s.retry(ctx, g, "time-to-live", "", func(ctx context.Context) (err error) {
		resp, err = g.s.cli.TimeToLive(ctx, g.id)
		return err
	})
	if err == nil && resp.TTL <= 0 || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		g.lose(fmt.Errorf("%w: etcd lease %x is gone (expired or revoked)", recipe.ErrSessionLost, int64(g.id)))
	}
	return g.ctx.Err() != nil
}

// keepAlive renews the lease every TTL/6 from sent (the grant's send time)
// until it is lost, acknowledging the send time of each answered
// keep-alive to the deadline. It sends one keep-alive at a time, each
// bounded by the deadline and by attemptTimeout, and retries a failed one
// after a short pause. The answer "lease not found" ends the lease with
// recipe.ErrSessionLost.
//
// The bound of one attempt is what keeps a lease alive while one member
// of a cluster is silent (cut off, or stopped): the client spreads its
// requests over its connections to every member, and a connection to a
// silent member stays open until gRPC's keep-alive closes it (15 s), so
// a keep-alive sent there gets no answer; abandoned after attemptTimeout,
// it is sent again, and most likely reaches another member, well before
// the deadline (2/3 TTL after the last acknowledged send).
func (g *generation) keepAlive(sent time.Time) {
	every := g.ttl / 6
	retry := min(every/4, 250*time.Millisecond)
	attempt := attemptTimeout(g.ttl)
	t := time.NewTimer(time.Until(sent.Add(every)))
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		end := g.dl.At()
		if a := sent.Add(attempt); a.Before(end) {
			end = a
		}
		ctx, cancel := context.WithDeadline(g.ctx, end)
		_, err := g.s.cli.KeepAliveOnce(ctx, g.id)
		cancel()
		next := sent.Add(every)
		switch {
		case err == nil:
			g.dl.Ack(sent)
		case g.ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			g.lose(fmt.Errorf("%w: etcd lease %x is gone (expired or revoked)", recipe.ErrSessionLost, int64(g.id)))
			return
		default:
			g.s.log.Debug("etcdlock: keep-alive failed", "lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
			next = time.Now().Add(retry)
		}
		t.Reset(time.Until(next))
	}
}

package k8slease

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/zkrecipes/zkrecipes/recipe"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Holder reads who holds the lock: one GET of its Lease (transient errors
// retried until ctx ends). Held names the Lease's holderIdentity as ID,
// Since its acquireTime (the holder's clock), Token its grant's (see Who
// holds the lock in the package documentation; 0 for a client-go elector's
// grant after its first renewal). A Lease with no holder, none, or one this
// Session has seen unchanged for its duration is free. Errors: ctx's cause,
// recipe.ErrSessionClosed, a *recipe.OpError (ErrBadRecord,
// ErrBadResourceVersion, the client's error).
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	if m.s.life.Closed() {
		return recipe.HolderState{}, recipe.ErrSessionClosed
	}
	ctx, cancel := m.s.life.Bind(ctx)
	defer cancel()
	cur, err := m.read(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	st, _, _, err := m.stateAt(cur, time.Now())
	return st, err
}

// stateAt is the state that cur (nil: no Lease) shows at now, read in one
// piece from one version of the Lease, and until when a held state lasts
// if nothing changes (the Session's count for contenders: Session.observe).
// known is false when the holder's token could not be read (Token 0).
//
// A state the server never had cannot come out of it: one version of the
// Lease names one holder, and its identity, its acquireTime and the token
// all come from that version. The token comes from the holder's own
// TokenAnnotation, which names the identity it belongs to (one left by an
// earlier holder names another and is ignored), or, before the holder's
// first renewal, from the grant's write itself, which every grant (this
// package's and client-go's) writes with acquireTime equal to renewTime and
// every renewal changes. A hand-off is one write: the version before names
// the old holder with its token, the version after the new one with a
// larger token, and a grant whose write is applied is shown as held even
// if its contender has not seen the answer yet: the server holds it so.
func (m *Mutex) stateAt(cur *coordv1.Lease, now time.Time) (_ recipe.HolderState, until time.Time, known bool, _ error) {
	until = m.s.observe(m.path, cur, now)
	id := holderOf(cur)
	if cur == nil || id == "" || !now.Before(until) {
		return recipe.HolderState{}, time.Time{}, false, nil
	}
	rv, err := tokenOf(cur.ResourceVersion)
	if err != nil {
		return recipe.HolderState{}, until, false, &recipe.OpError{Op: "holder", Path: m.path, Err: err}
	}
	h := recipe.Holder{ID: id}
	if t := cur.Spec.AcquireTime; t != nil {
		h.Since = t.Time
	}
	tok, found, err := stampOf(cur, rv)
	switch {
	case err != nil:
		return recipe.HolderState{}, until, false, &recipe.OpError{Op: "holder", Path: m.path, Err: err}
	case found:
		h.Token, known = tok, true
	case grantWrite(cur):
		h.Token, known = rv, true
	}
	return recipe.HolderState{Held: true, Holder: h}, until, known, nil
}

// grantWrite reports whether cur is the version a grant wrote, as far as
// the Lease tells: acquireTime equal to renewTime.
func grantWrite(cur *coordv1.Lease) bool {
	a, r := cur.Spec.AcquireTime, cur.Spec.RenewTime
	return a != nil && r != nil && a.Equal(r)
}

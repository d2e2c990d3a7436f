package nemesis

import (
	"context"
	"sync"
	"time"
)

// recorder records the grants and ops of a run, with times since its start.
type recorder struct {
	start  time.Time
	mu     sync.Mutex
	grants []*grantRec
	active map[int]*grantRec
	ops    []Op
}

type grantRec struct {
	Grant
	ctx context.Context
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), active: map[int]*grantRec{}}
}

func (r *recorder) now() time.Duration { return time.Since(r.start) }

// grant registers a grant and samples the live leases (itself included).
func (r *recorder) grant(client int, hd Held) *Grant {
	r.mu.Lock()
	g := &grantRec{Grant: Grant{ID: len(r.grants), Client: client, Role: hd.Role, Token: hd.Token,
		Asked: hd.Asked.Sub(r.start), Granted: r.now(), Ended: -1}, ctx: hd.Ctx}
	r.grants = append(r.grants, g)
	r.active[g.ID] = g
	r.ops = append(r.ops, Op{Kind: OpGrant, Client: client, Grant: g.ID, Token: hd.Token, Call: g.Granted, Return: g.Granted, Live: r.liveLocked()})
	r.mu.Unlock()
	context.AfterFunc(hd.Ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if g.Ended < 0 {
			g.Ended, g.Lost = r.now(), true
		}
		g.Cause = context.Cause(g.ctx).Error()
		delete(r.active, g.ID)
	})
	return &g.Grant
}

// failed records an attempt to be granted that failed.
func (r *recorder) failed(client int, asked time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, Op{Kind: OpAcquire, Client: client, Grant: -1, Call: asked.Sub(r.start), Return: r.now(), Err: err.Error()})
}

// giveUp records that the holder is about to give the grant up.
func (r *recorder) giveUp(g *Grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.Ended < 0 {
		g.Ended = r.now()
	}
}

func (r *recorder) probe(client int, g *Grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.now()
	r.ops = append(r.ops, Op{Kind: OpProbe, Client: client, Grant: g.ID, Token: g.Token, Call: t, Return: t, Live: r.liveLocked()})
}

func (r *recorder) op(o Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

// live lists the grants whose lease context is not done, read now.
func (r *recorder) live() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveLocked()
}

func (r *recorder) liveLocked() []int {
	var ids []int
	for id, g := range r.active {
		if g.ctx.Err() == nil {
			ids = append(ids, id)
		}
	}
	if ids == nil {
		ids = []int{}
	}
	return ids
}

// holders reports which clients hold a live grant now.
func (r *recorder) holders() map[int]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := map[int]bool{}
	for _, g := range r.active {
		if g.ctx.Err() == nil {
			held[g.Client] = true
		}
	}
	return held
}

func (r *recorder) firstGrantAfter(t time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.grants {
		if g.Granted >= t {
			return g.Granted
		}
	}
	return -1
}

func (r *recorder) snapshot() ([]Grant, []Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gs := make([]Grant, len(r.grants))
	for i, g := range r.grants {
		gs[i] = g.Grant
	}
	return gs, append([]Op(nil), r.ops...)
}

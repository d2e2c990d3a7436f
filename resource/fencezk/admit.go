package fencezk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Fence is a fence.Fence over the registers below one directory: resource
// names the register dir/resource. Its write adds ZooKeeper operations
// with [AddOps]; they land in one multi with the register's versioned
// update, as with [Register.Apply], or not at all. It is safe for
// concurrent use.
type Fence struct {
	s    *zookeeper.Session
	dir  string
	opts []Option

	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token (its Registers' too): wire
	// recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// NewFence returns the fence over the registers below dir (relative to
// the session's chroot, made with the register's first write as New
// says); opts apply to every register. It sends nothing. Errors: a
// *zookeeper.PathError (recipe.ErrInvalidPath) for a bad dir.
func NewFence(s *zookeeper.Session, dir string, opts ...Option) (*Fence, error) {
	if err := zkside.SessionOf(s).ValidatePath(dir); err != nil {
		return nil, err
	}
	return &Fence{s: s, dir: strings.TrimSuffix(dir, "/"), opts: opts}, nil
}

// Register returns the register of resource. Errors: an error matching
// fence.ErrBadResource for a name that fence.CheckResource refuses or that
// is not one valid znode name (a "/", ".", "..", a reserved name).
func (f *Fence) Register(resource string) (*Register, error) {
	if err := fence.CheckResource(resource); err != nil {
		return nil, err
	}
	if strings.Contains(resource, "/") {
		return nil, fmt.Errorf("%w: contains a /", fence.ErrBadResource)
	}
	r, err := New(f.s, f.dir+"/"+resource, f.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", fence.ErrBadResource, err)
	}
	r.OnStale = f.OnStale
	return r, nil
}

// Admit implements fence.Fence. It reads the register and, if t is not
// lower than its token, calls write with a ctx to which [AddOps] adds
// operations; then it applies them with t in one multi, as
// [Register.Apply] does (the register keeps its value). If another write
// landed on the register meanwhile with a larger token, nothing of write's
// is applied and a *fence.StaleError is returned although write ran.
// Errors: those of Apply, fence.ErrBadResource (see [Fence.Register]),
// write's error as it returned it (nothing applied).
func (f *Fence) Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	var werr error
	var w func(ctx context.Context) error
	if write != nil {
		w = func(ctx context.Context) error { werr = write(ctx); return werr }
	}
	err := f.admit(ctx, resource, t, w)
	return fence.Reported(err, werr, f.OnStale)
}

func (f *Fence) admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	if t.IsZero() {
		return fence.ErrNoToken
	}
	if err := fence.CheckToken(t); err != nil {
		return err
	}
	r, err := f.Register(resource)
	if err != nil {
		return err
	}
	cur, err := r.Read(ctx)
	if err != nil {
		return err
	}
	if t < cur.Token {
		return &fence.StaleError{Resource: resource, Token: t, Highest: cur.Token}
	}
	b := &opBatch{ops: []any{}} // non-nil: the register keeps its value
	if write != nil {
		if err := write(context.WithValue(ctx, opsKey{}, b)); err != nil {
			return err
		}
	}
	ops, err := b.close(r)
	if err != nil {
		return err
	}
	_, _, err = r.write(ctx, t, nil, ops)
	if se := (*fence.StaleError)(nil); errors.As(err, &se) {
		se.Resource = resource
	}
	return err
}

var _ fence.Fence = (*Fence)(nil)

// opsKey is the context key of the operations of an Admit's write.
type opsKey struct{}

// opBatch collects the operations of one Admit's write.
type opBatch struct {
	mu     sync.Mutex
	ops    []any
	closed bool
}

// ErrNoBatch is matched by AddOps's error for a ctx that is not (derived
// from) the ctx of a write of [Fence.Admit] still running.
var ErrNoBatch = errors.New("fencezk: AddOps outside a running write of Fence.Admit")

// AddOps adds ops (each a *zk.CreateRequest, *zk.SetDataRequest,
// *zk.DeleteRequest or *zk.CheckVersionRequest, paths relative to the
// chroot) to the multi of the [Fence.Admit] whose write got ctx: they land
// with its token or not at all. Errors: ErrNoBatch; ErrBadOp for an
// operation Apply refuses is returned by Admit.
func AddOps(ctx context.Context, ops ...any) error {
	b, ok := ctx.Value(opsKey{}).(*opBatch)
	if !ok {
		return ErrNoBatch
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrNoBatch
	}
	b.ops = append(b.ops, ops...)
	return nil
}

// close ends the batch and returns its operations rooted below the chroot.
func (b *opBatch) close(r *Register) ([]any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	rooted := make([]any, len(b.ops))
	for i, op := range b.ops {
		var err error
		if rooted[i], err = r.root(op); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	return rooted, nil
}

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// qdir is a Queue's directory on its Session, and the part of the queue
// that owns what does not depend on the Rule: the protected create
// (create.go), the directory and its ACL (dirs.go, diracl.go), the reads
// from outside (observe.go), the order at the sequence limit (limit.go),
// request sizes (packet.go), the deletes of nodes given up, and the work
// left in flight that Drain waits for.
type qdir struct {
	s       *Session
	dir     string // as given, relative to the chroot
	adir    string // absolute (chroot prepended)
	kinds   []string
	reqSize int      // bounds its requests but for creates' data: queueRequestSize
	pending inflight // creates and deletes whose outcome nobody waits for yet
}

// inflight counts operations and lets a caller wait for zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n == 0
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
		f.zero = nil
	}
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.zero
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// mixed is the error of a listing that holds nodes of another recipe's
// kind k.
func (q *qdir) mixed(k string) error {
	return fmt.Errorf("%w: %s holds a node of kind %q, which this queue (kinds %q) does not use", recipe.ErrMixedRecipes, shortpath.Of(q.dir), k, q.kinds)
}

// vanished explains why the own node is no longer listed.
func (q *qdir) vanished(ep *epoch) error {
	if ep.ctx.Err() != nil {
		return context.Cause(ep.ctx)
	}
	return fmt.Errorf("%w: %s", recipe.ErrNodeDeleted, shortpath.Of(q.dir))
}

func (q *qdir) wrap(op string, err error) error {
	var oe *recipe.OpError
	if err == nil || errors.As(err, &oe) || errors.Is(err, recipe.ErrSessionLost) || errors.Is(err, recipe.ErrNodeDeleted) ||
		errors.Is(err, recipe.ErrSessionClosed) || errors.Is(err, recipe.ErrSuspended) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, recipe.ErrLocked) {
		return err
	}
	return opErr(op, q.dir, err)
}

// opErr is the *recipe.OpError of op on path (below the chroot) failing
// with err, nil for nil; a closed client is recipe.ErrSessionClosed.
func opErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	if isClosing(err) {
		err = fmt.Errorf("%w (%v)", recipe.ErrSessionClosed, err)
	}
	return &recipe.OpError{Op: op, Path: path, Err: zkError{err}}
}

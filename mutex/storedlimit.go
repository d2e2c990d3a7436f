package mutex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A semaphore whose limit is stored with it: the directory's data is
// "limit <n>". Why it never grants more than the stored n
// (docs/recipes.md#a-stored-limit):
//
//   - One n is stored per directory: the first contender creates the
//     directory, persistent, with its data (one found without data, a
//     container the engine made, is deleted first while unused, and
//     refused with ErrBadLimit while in use); of two first contenders with
//     different n, the second's create is refused (NodeExists) and it
//     reads the first's n. Only SetSemaphoreLimit changes it afterwards.
//   - Every grant is decided on a listing (getChildren2) whose reply
//     carries the directory's Stat: the engine (zookeeper.RuleFromDirData)
//     decides it with the limit of the data at that Stat's czxid and data
//     version, or reads the data again after the listing and decides with
//     that newer limit. A contender whose own n differs from the data
//     fails with ErrLimitMismatch instead, and leaves no node.
//   - So, while the stored n does not change, every grant in a directory is
//     SemaphoreRule(n)'s, whose holders are at most n (case C14); a
//     directory re-created has a new czxid, and holds none of the old
//     nodes. Across a change from n to m, the holders granted under n stay
//     (nothing is revoked): at most max(n, m) hold until they are gone.

// Errors of a stored limit. Both also match recipe.ErrBadOption, so that
// recipe.Permanent reports them and leader.Run stops on them.
var (
	// ErrLimitMismatch: the semaphore directory stores a limit other than
	// the caller's (NewSemaphore with StoredLimit).
	ErrLimitMismatch = errors.New("mutex: the semaphore's stored limit is another")

	// ErrBadLimit: the semaphore directory's data is not a limit this
	// package writes (malformed, or out of 1..MaxLimit), or, for
	// OpenSemaphore, it holds none.
	ErrBadLimit = errors.New("mutex: no valid semaphore limit stored")
)

// MaxLimit is the largest limit a semaphore may store: a waiter watches as
// many nodes as the limit, and a listing of more nodes than that would be
// over ZooKeeper's default packet size.
const MaxLimit = 1 << 14

// SemaphoreOption configures NewSemaphore: every Option, and StoredLimit,
// which only NewSemaphore takes.
type SemaphoreOption interface{ applySemaphore(*config) }

func (o Option) applySemaphore(c *config) {
	if o != nil {
		o(c)
	}
}

type storedOption struct{}

func (storedOption) applySemaphore(c *config) { c.stored = true }

// StoredLimit makes NewSemaphore's limit the one stored in the directory's
// data: the first Acquire of the Semaphore stores its n when none is (the
// directory created persistent if missing), and every contender whose n
// differs from the stored one fails with ErrLimitMismatch, leaving no
// node. Every program using the directory must use StoredLimit or
// OpenSemaphore: a plain NewSemaphore reads nothing.
func StoredLimit() SemaphoreOption { return storedOption{} }

// storedLimit is a Semaphore's stored limit: n is the caller's (0: follow
// the stored one), known that the limit was found stored, seen the limit
// of the data the engine last decided under.
type storedLimit struct {
	node  *zookeeper.ValueNode
	q     *zookeeper.Queue // its queue, to tell another recipe's nodes
	path  string
	n     int
	known atomic.Bool
	seen  atomic.Int64
}

// errNoLimit marks ErrBadLimit when the data is empty: a contender with its
// own n stores it and tries once more (the directory was re-created).
var errNoLimit = errors.New("no limit stored")

// maxStoreTries bounds the read-and-write rounds of check and
// SetSemaphoreLimit against writers that keep winning.
const maxStoreTries = 10

// limitData is the data of limit n.
func limitData(n int) []byte { return []byte("limit " + strconv.Itoa(n)) }

// parseLimit reads data as a limit: exactly "limit " and a decimal in
// 1..MaxLimit without sign or leading zero. Anything else is ErrBadLimit
// (with errNoLimit when data is empty); data is quoted only when short.
func parseLimit(path string, data []byte) (int, error) {
	if len(data) == 0 {
		return 0, fmt.Errorf("%w: %w in %s", ErrBadLimit, errNoLimit, shortpath.Of(path))
	}
	const prefix, most = "limit ", len("limit 16384")
	s := string(data)
	bad := len(s) > most || len(s) <= len(prefix) || s[:len(prefix)] != prefix || s[len(prefix)] == '0'
	for i := len(prefix); !bad && i < len(s); i++ {
		bad = s[i] < '0' || s[i] > '9'
	}
	if bad {
		if len(data) > 32 {
			return 0, fmt.Errorf("%w: %s holds %d bytes of data, not a limit", ErrBadLimit, shortpath.Of(path), len(data))
		}
		return 0, fmt.Errorf("%w: %s holds %q, not a limit", ErrBadLimit, shortpath.Of(path), s)
	}
	n, err := strconv.Atoi(s[len(prefix):])
	if err != nil || n > MaxLimit {
		return 0, fmt.Errorf("%w: %s holds %q, over the largest limit %d", ErrBadLimit, shortpath.Of(path), s, MaxLimit)
	}
	return n, nil
}

// LimitOf reads a semaphore directory's data as its stored limit ("limit
// <n>", n in 1..MaxLimit), for tools such as zkrecipes inspect. Errors:
// ErrBadLimit for anything else, empty data included.
func LimitOf(data []byte) (int, error) { return parseLimit("the directory", data) }

// checkLimit refuses a limit out of 1..MaxLimit.
func checkLimit(n int) error {
	if n < 1 || n > MaxLimit {
		return fmt.Errorf("%w: a semaphore limit is 1 to %d, got %d", recipe.ErrBadOption, MaxLimit, n)
	}
	return nil
}

// rule is the queue's zookeeper.RuleFromDirData: SemaphoreRule of the
// stored limit, or its refusal (ErrBadLimit; ErrLimitMismatch for a
// caller's n that differs).
func (l *storedLimit) rule(data []byte) (zookeeper.Rule, error) {
	m, err := parseLimit(l.path, data)
	if err == nil && l.n != 0 && m != l.n {
		err = l.mismatch(m)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, recipe.ErrBadOption)
	}
	l.seen.Store(int64(m))
	return SemaphoreRule(m), nil
}

func (l *storedLimit) mismatch(m int) error {
	return fmt.Errorf("%w: %s stores limit %d, this semaphore's is %d", ErrLimitMismatch, shortpath.Of(l.path), m, l.n)
}

// check makes sure, once per Semaphore, that a limit is stored before the
// first node is created (ValueNode: sync and getData; when none is and the
// caller has its own n, a delete of a directory without data, unContainer,
// and a create). A write refused because another was first reads again.
func (l *storedLimit) check(ctx context.Context) error {
	if l.known.Load() {
		return nil
	}
	for range maxStoreTries {
		v, err := l.node.Read(ctx)
		if err != nil {
			return err
		}
		if v.Exists && len(v.Data) > 0 || l.n == 0 {
			if _, err := l.rule(v.Data); err != nil {
				return err
			}
			l.known.Store(true)
			return nil
		}
		if v.Exists {
			if err := l.unContainer(ctx); err != nil {
				return err
			}
			continue
		}
		version := int32(-1)
		_, err = l.node.Write(ctx, limitData(l.n), version)
		if err == nil {
			l.seen.Store(int64(l.n))
			l.known.Store(true)
			return nil
		}
		if !errors.Is(err, recipe.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: %s: the limit kept changing while it was stored (%d tries)", recipe.ErrConflict, shortpath.Of(l.path), maxStoreTries)
}

// unContainer deletes the directory found without a limit, so that the
// limit is stored on a persistent one made anew: the engine makes its
// directories as containers, which ZooKeeper removes, data and all, once
// empty (and a client cannot tell a container from its Stat). One in use
// (a semaphore without a stored limit, or one made again after it was
// deleted under its waiters) is refused with ErrBadLimit.
func (l *storedLimit) unContainer(ctx context.Context) error {
	err := l.node.Delete(ctx)
	if err == nil {
		return nil
	}
	if _, perr := l.q.Participants(ctx); errors.Is(perr, recipe.ErrMixedRecipes) {
		return perr // in use by another recipe: say that
	}
	return fmt.Errorf("%w: %s is in use without a stored limit (by a semaphore without StoredLimit, or made again after it was deleted): store the limit while it is unused (%w) (%w)", ErrBadLimit, shortpath.Of(l.path), err, recipe.ErrBadOption)
}

// acquire is Acquire (wait) or TryAcquire of a semaphore with a stored
// limit: check, then the queue's. A directory re-created since check (its
// data empty) is checked again, once; after a refusal of the stored data,
// the next call checks before it creates a node.
func (l *storedLimit) acquire(ctx context.Context, q *zookeeper.Queue, data []byte, wait bool) (recipe.Lease, error) {
	for try := 0; ; try++ {
		if err := l.check(ctx); err != nil {
			return nil, err
		}
		var lease recipe.Lease
		var err error
		if wait {
			lease, err = q.Acquire(ctx, SemaphoreKind, data)
		} else {
			lease, err = q.TryAcquire(ctx, SemaphoreKind, data)
		}
		if errors.Is(err, ErrBadLimit) || errors.Is(err, ErrLimitMismatch) {
			l.known.Store(false) // the next call checks before it creates a node
			if try == 0 && errors.Is(err, errNoLimit) {
				continue
			}
		}
		return lease, err
	}
}

// OpenSemaphore returns the semaphore over the directory path whose limit
// is the one stored there (NewSemaphore with StoredLimit, or
// SetSemaphoreLimit), followed as it changes: a waiter is woken by a
// change and decides under the new limit. It sends nothing; Acquire
// refuses with ErrBadLimit while no valid limit is stored. Errors: as
// NewSemaphore.
func OpenSemaphore(s *zookeeper.Session, path string, opts ...Option) (*Semaphore, error) {
	sopts := make([]SemaphoreOption, len(opts))
	for i, o := range opts {
		sopts[i] = o
	}
	return newStored(s, path, 0, sopts)
}

// SetSemaphoreLimit stores n as the limit of the semaphore directory path
// (made persistent if missing or without data, as a contender does): sync,
// getData, then a setData at the version read, again after another write.
// Waiting contenders see it at their next listing (they watch the data):
// a larger limit lets more in; NewSemaphore contenders of another n fail
// with ErrLimitMismatch; holders are never revoked. Errors: recipe.ErrBadOption
// for n out of 1..MaxLimit; ErrBadLimit for data that is not a limit (left
// as it is); path errors as NewSemaphore; *recipe.OpError; ctx's cause.
func SetSemaphoreLimit(ctx context.Context, s *zookeeper.Session, path string, n int) error {
	if err := checkLimit(n); err != nil {
		return err
	}
	sem, err := newStored(s, path, n, nil)
	if err != nil {
		return err
	}
	l := sem.stored
	for range maxStoreTries {
		v, err := l.node.Read(ctx)
		if err != nil {
			return err
		}
		if v.Exists && len(v.Data) == 0 {
			if err := l.unContainer(ctx); err != nil {
				return err
			}
			continue
		}
		version := int32(-1)
		if v.Exists {
			version = v.Version
		}
		if len(v.Data) > 0 {
			if m, err := parseLimit(path, v.Data); err != nil || m == n {
				return err
			}
		}
		_, err = l.node.Write(ctx, limitData(n), version)
		if !errors.Is(err, recipe.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: %s: the limit kept changing while it was set (%d tries)", recipe.ErrConflict, shortpath.Of(path), maxStoreTries)
}

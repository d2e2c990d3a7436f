package value

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Option configures New.
type Option func(*Value)

// WithLogger sets the logger of the value's watches (reads that failed
// and are retried; default: the Session's logger, zookeeper.WithLogger).
func WithLogger(l *slog.Logger) Option {
	return func(v *Value) {
		if l != nil {
			v.log = l
		}
	}
}

// Value is a shared value in one persistent znode (see the package doc).
// All methods are safe for concurrent use.
type Value struct {
	n   *zookeeper.ValueNode
	log *slog.Logger // nil: the Session's
}

var _ recipe.Value = (*Value)(nil)

// New returns the value in the znode at path (below the session's chroot)
// on s. It sends nothing. Errors: a *zookeeper.PathError (matching
// recipe.ErrInvalidPath) for a path the recipes refuse (package
// zookeeper, "Paths"); recipe.ErrBadOption for a nil s;
// recipe.ErrSessionClosed.
func New(s *zookeeper.Session, path string, opts ...Option) (*Value, error) {
	n, err := zookeeper.NewValueNode(s, path)
	if err != nil {
		return nil, err
	}
	v := &Value{n: n}
	for _, o := range opts {
		if o != nil {
			o(v)
		}
	}
	return v, nil
}

// Path returns the value's znode path (relative to the session's chroot).
func (v *Value) Path() string { return v.n.Path() }

// Get reads the value after a sync (recipe.Value.Get): at least as new as
// every write completed before the call. ZooKeeper operations: sync,
// getData, and for a missing node getChildren of its parent (for Rev).
// Errors: *recipe.OpError; recipe.ErrSessionClosed; ctx's cause.
func (v *Value) Get(ctx context.Context) (recipe.Versioned, error) {
	if ctx == nil {
		return recipe.Versioned{}, fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	nv, err := v.n.Read(ctx)
	if err != nil {
		return recipe.Versioned{}, err
	}
	return versioned(nv), nil
}

// TrySet writes data if the value's Version is still expected
// (recipe.Value.TrySet): with 0, creates the node (and its missing
// parents) only if it does not exist; else a setData with data version
// expected-1. A lost reply is settled by reading the node (package doc).
// Errors: recipe.ErrConflict when the version differs (nothing written);
// recipe.ErrTooLarge for data over the packet limit, before anything is
// sent; recipe.ErrBadOption for a negative expected or one beyond
// ZooKeeper's versions; *recipe.OpError; recipe.ErrSessionClosed; ctx's
// cause (after a send the write may have applied: Get tells).
func (v *Value) TrySet(ctx context.Context, expected int64, data []byte) (recipe.Versioned, error) {
	if expected < 0 || expected > math.MaxInt32 {
		return recipe.Versioned{}, fmt.Errorf("%w: value: expected version %d (0 to %d)", recipe.ErrBadOption, expected, int64(math.MaxInt32))
	}
	if ctx == nil {
		return recipe.Versioned{}, fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	data = append([]byte{}, data...) // the caller may reuse its slice; never nil: nil Data means absent
	nv, err := v.n.Write(ctx, data, int32(expected-1))
	if err != nil {
		return recipe.Versioned{}, err
	}
	return versioned(nv), nil
}

// Watch delivers the value now and after each change (recipe.Value.Watch),
// coalesced, never going back in Rev; a deleted value is delivered with
// Version 0. See the package doc for the watches. The channel closes when
// ctx ends (a nil ctx never ends), the Session closes, or reading fails
// for good (logged).
func (v *Value) Watch(ctx context.Context) <-chan recipe.Versioned {
	if ctx == nil {
		ctx = context.Background()
	}
	return relay(ctx, v.n.Observe(ctx, v.log))
}

// relay converts node states to values, coalescing as Observe does: a
// value not taken yet is replaced by a newer one.
func relay(ctx context.Context, in <-chan zookeeper.NodeValue) <-chan recipe.Versioned {
	out := make(chan recipe.Versioned)
	go func() {
		defer close(out)
		var next recipe.Versioned
		have := false
		for {
			var send chan<- recipe.Versioned
			if have {
				send = out
			}
			select {
			case nv, ok := <-in:
				if !ok {
					return
				}
				next, have = versioned(nv), true
			case send <- next:
				have = false
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// versioned is the value a node state shows.
func versioned(nv zookeeper.NodeValue) recipe.Versioned {
	if !nv.Exists {
		return recipe.Versioned{Rev: nv.Zxid}
	}
	data := nv.Data
	if data == nil {
		data = []byte{}
	}
	return recipe.Versioned{Data: data, Version: int64(nv.Version) + 1, Rev: nv.Zxid}
}

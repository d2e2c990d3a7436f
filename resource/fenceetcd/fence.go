package fenceetcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Errors of this package, matched with errors.Is. Bad input is refused
// before anything is sent.
var (
	// ErrBadPrefix: New's key prefix is empty or not valid UTF-8.
	ErrBadPrefix = errors.New("fenceetcd: bad key prefix")
	// ErrBadOp: an operation that is not a put, delete or get, or that
	// touches a key under the fence's prefix (a fence key: a put would
	// forge a token, a delete would forget one).
	ErrBadOp = errors.New("fenceetcd: bad operation")
	// ErrNotFence: the key holds a value this package did not write (not
	// a token, or a register's value that is not one): another program's
	// key, or a prefix typo.
	ErrNotFence = errors.New("fenceetcd: key does not hold a fence token")
)

// Fence keeps, for each resource, the highest fencing token accepted in
// the etcd key prefix+resource (the token as 19 decimal digits), and
// applies a caller's etcd operations only together with a token at least
// that high, in one transaction. It is safe for concurrent use.
type Fence struct {
	kv     clientv3.KV
	prefix string
	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token: wire recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// New returns the fence whose keys are prefix+resource. Give the fence a
// prefix of its own ("/myapp/fence/"): operations on keys under it are
// refused (ErrBadOp). It sends nothing. Errors: ErrBadPrefix.
func New(kv clientv3.KV, prefix string) (*Fence, error) {
	if prefix == "" || !utf8.ValidString(prefix) {
		return nil, fmt.Errorf("%w: %q", ErrBadPrefix, prefix)
	}
	return &Fence{kv: kv, prefix: prefix}, nil
}

// Key returns the etcd key that holds resource's highest token. Errors:
// an error matching fence.ErrBadResource for a name fence.CheckResource
// refuses (empty, over fence.MaxResourceLen bytes, not UTF-8, a NUL byte).
func (f *Fence) Key(resource string) (string, error) {
	if err := fence.CheckResource(resource); err != nil {
		return "", err
	}
	return f.prefix + resource, nil
}

// Result is what an accepted Do did.
type Result struct {
	Prev      fence.Token      // the highest token accepted before (zero: none)
	Revision  int64            // the etcd revision of the transaction
	Responses []*pb.ResponseOp // the answers to the caller's ops, in order
}

// Do applies ops in one etcd transaction with the put of token as
// resource's highest, if token is not lower than the highest accepted: the
// ops land only with the token, and none of them otherwise (a
// *fence.StaleError with the highest accepted). An equal token is
// accepted; empty ops only record token. Each op must be a clientv3.OpPut,
// OpDelete or OpGet on keys outside the fence's prefix, within etcd's
// limits of a transaction. After an error nothing was applied, unless it
// matches fence.ErrUncertain (see Errors in the package documentation).
func (f *Fence) Do(ctx context.Context, resource string, token fence.Token, ops ...clientv3.Op) (Result, error) {
	r, err := f.do(ctx, resource, token, ops)
	return r, fence.Reported(err, nil, f.OnStale)
}

func (f *Fence) do(ctx context.Context, resource string, token fence.Token, ops []clientv3.Op) (Result, error) {
	key, err := f.Key(resource)
	if err != nil {
		return Result{}, err
	}
	if err := checkToken(token); err != nil {
		return Result{}, err
	}
	for i, op := range ops {
		if err := f.checkOp(op); err != nil {
			return Result{}, fmt.Errorf("op %d: %w", i, err)
		}
	}
	put := clientv3.OpPut(key, pad(uint64(token)), clientv3.WithPrevKV())
	out, err := guarded(ctx, f.kv, key, pad(uint64(token)+1), pad(0), put, ops)
	if err != nil {
		return Result{}, err
	}
	high, err := f.token(key, out.prev)
	if !out.ok {
		if err != nil {
			return Result{}, err
		}
		return Result{}, &fence.StaleError{Resource: resource, Token: token, Highest: high}
	}
	// Accepted over a value of another format that sorts below the token
	// (an empty one, say): it is a token now; Prev says none.
	return Result{Prev: high, Revision: out.revision, Responses: out.resps}, nil
}

// Highest returns the highest token accepted for resource (zero if none).
// Errors: fence.ErrBadResource (see Key), ErrNotFence, etcd's.
func (f *Fence) Highest(ctx context.Context, resource string) (fence.Token, error) {
	key, err := f.Key(resource)
	if err != nil {
		return 0, err
	}
	resp, err := f.kv.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("fenceetcd: reading %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return f.token(key, resp.Kvs[0].Value)
}

// token decodes a fence key's value (nil or empty: no token yet).
func (f *Fence) token(key string, v []byte) (fence.Token, error) {
	if len(v) == 0 {
		return 0, nil
	}
	t, ok := parseToken(v)
	if !ok || len(v) != tokenWidth {
		return 0, errNotOurs(ErrNotFence, key, v)
	}
	return t, nil
}

// checkOp refuses what ErrBadOp describes.
func (f *Fence) checkOp(op clientv3.Op) error {
	if !op.IsPut() && !op.IsDelete() && !op.IsGet() {
		return fmt.Errorf("%w: only puts, deletes and gets (not a nested transaction)", ErrBadOp)
	}
	if op.IsGet() {
		return nil // reading a fence key changes nothing
	}
	key, end := op.KeyBytes(), op.RangeBytes()
	p := []byte(f.prefix)
	pend := []byte(clientv3.GetPrefixRangeEnd(f.prefix))
	switch {
	case len(end) == 0: // one key
		if bytes.HasPrefix(key, p) {
			return fmt.Errorf("%w: %q is under the fence's prefix %q", ErrBadOp, key, f.prefix)
		}
	case overlaps(key, end, p, pend):
		return fmt.Errorf("%w: the range [%q, %q) overlaps the fence's prefix %q", ErrBadOp, key, end, f.prefix)
	}
	return nil
}

// overlaps reports whether the key ranges [a, aend) and [b, bend)
// intersect; an end of "\x00" is etcd's "to the last key".
func overlaps(a, aend, b, bend []byte) bool {
	below := func(x, end []byte) bool { // x < end
		return bytes.Equal(end, []byte{0}) || bytes.Compare(x, end) < 0
	}
	return below(a, bend) && below(b, aend)
}

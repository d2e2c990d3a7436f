package fenceetcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
)

// ErrBadKey is returned for an empty register key.
var ErrBadKey = errors.New("fenceetcd: bad register key")

// Value is a register's content.
type Value struct {
	Token    fence.Token // the highest token accepted (zero: none yet)
	Data     []byte      // the value of the last accepted write
	Revision int64       // the key's mod revision (etcd's order of writes); 0 if it does not exist
}

// Register is a value and the highest token accepted for it in one etcd
// key: the token as 19 decimal digits, a newline, then the value. A write
// lands only with a token at least the stored one, in one transaction
// comparing the key's value. It is safe for concurrent use.
type Register struct {
	kv  clientv3.KV
	key string
	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token: wire recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// NewRegister returns the register in key. It sends nothing. Errors:
// ErrBadKey for an empty key.
func NewRegister(kv clientv3.KV, key string) (*Register, error) {
	if key == "" {
		return nil, ErrBadKey
	}
	return &Register{kv: kv, key: key}, nil
}

// Key returns the register's etcd key.
func (r *Register) Key() string { return r.key }

// Read returns the register's content: the zero Value if its key does not
// exist. Errors: ErrNotFence for a value in another format, etcd's.
func (r *Register) Read(ctx context.Context) (Value, error) {
	resp, err := r.kv.Get(ctx, r.key)
	if err != nil {
		return Value{}, fmt.Errorf("fenceetcd: reading %q: %w", r.key, err)
	}
	if len(resp.Kvs) == 0 {
		return Value{}, nil
	}
	kv := resp.Kvs[0]
	v, err := r.decode(kv.Value)
	v.Revision = kv.ModRevision
	return v, err
}

// Write stores data with token if token is not lower than the register's,
// and returns what it replaced (the zero Value for a missing key) and the
// revision of the write. An equal token is accepted; a lower one gets a
// *fence.StaleError (fence.ErrStale) with the stored token, nothing
// written. Its other errors (fence.ErrNoToken, ErrNotFence,
// fence.ErrUncertain, ...) are listed under Errors in the package
// documentation.
func (r *Register) Write(ctx context.Context, token fence.Token, data []byte) (prev Value, revision int64, err error) {
	prev, revision, err = r.write(ctx, token, data)
	return prev, revision, fence.Reported(err, nil, r.OnStale)
}

func (r *Register) write(ctx context.Context, token fence.Token, data []byte) (prev Value, revision int64, err error) {
	if err := checkToken(token); err != nil {
		return Value{}, 0, err
	}
	put := clientv3.OpPut(r.key, encode(token, data), clientv3.WithPrevKV())
	out, err := guarded(ctx, r.kv, r.key, pad(uint64(token)+1), encode(0, nil), put, nil)
	if err != nil {
		return Value{}, 0, err
	}
	if !out.ok {
		cur, err := r.decode(out.prev)
		if err != nil {
			return Value{}, 0, err
		}
		return cur, 0, &fence.StaleError{Resource: r.key, Token: token, Highest: cur.Token}
	}
	// A value of another format that sorts below the token was
	// overwritten (the comparison let it through): prev is then zero.
	prev, _ = r.decode(out.prev)
	return prev, out.revision, nil
}

// RaiseFloor makes floor the lowest token the register accepts from now on:
// its token becomes max(token, floor) and its data stays, with a
// compare-and-set on the key's revision, retried while other writes land
// (a missing register is created empty). It returns the token now stored;
// it never lowers it, and a zero floor changes nothing. It is the
// operator's step of a switch of lock backend (docs/backends.md).
// Errors: a *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor (fence.CheckFloor); ErrNotFence; fence.ErrUncertain
// (call again); etcd's.
func (r *Register) RaiseFloor(ctx context.Context, floor fence.Token) (fence.Token, error) {
	if err := fence.CheckFloor(floor); err != nil {
		return 0, err
	}
	for {
		cur, err := r.Read(ctx)
		if err != nil || cur.Token >= floor {
			return cur.Token, err
		}
		resp, err := r.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(r.key), "=", cur.Revision)).
			Then(clientv3.OpPut(r.key, encode(floor, cur.Data))).
			Commit()
		if err != nil {
			return 0, classify(err)
		}
		if resp.Succeeded {
			return floor, nil
		}
	}
}

func (r *Register) decode(v []byte) (Value, error) {
	if len(v) == 0 {
		return Value{}, nil
	}
	t, ok := parseToken(v)
	if !ok || len(v) < tokenWidth+1 || v[tokenWidth] != '\n' {
		return Value{}, errNotOurs(ErrNotFence, r.key, v)
	}
	return Value{Token: t, Data: v[tokenWidth+1:]}, nil
}

func encode(t fence.Token, data []byte) string {
	return pad(uint64(t)) + "\n" + string(data)
}

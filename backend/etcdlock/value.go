package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MaxValueData is the largest data a Value carries, in bytes (TrySet
// refuses more with an error matching recipe.ErrTooLarge): as
// MaxMemberData, room below etcd's default request limit of 1.5 MiB
// (--max-request-bytes) for the key and the transaction around the data.
const MaxValueData = 1 << 20

// valueElement is the last element of a Value's key: the value named N is
// the key <prefix>/N/_value_. It starts with neither marker nor
// memberMarker, so no lock's or group's range holds it; and since no
// element of a name may start with those, no value key is in such a range
// either (a name "N/_lock_x" is refused).
const valueElement = "_value_"

// Value is a shared value on etcd (recipe.Value; Curator's SharedValue and
// SharedCount, kazoo's Counter): one key, <prefix>/<name>/_value_, that
// outlives every Session (no etcd lease). Its Version is the key's mod
// revision, and so is its Rev; a missing value's Rev is the revision of
// the read that found it missing. TrySet is one transaction comparing the
// key's mod revision (its create revision with 0: only if missing); a try
// whose answer was lost is settled by reading the key (see TrySet). Get is
// a linearizable (quorum) read. Watch reads, then watches from the next
// revision, reading again after a compaction or a silent watch. It is
// safe for concurrent use.
type Value struct {
	s    *Session
	name string
	key  string
}

var _ recipe.Value = (*Value)(nil)

// NewValue returns the value named name on s. A name is checked as a lock
// name (CheckName): an invalid one returns a *NameError matching
// ErrInvalidName and recipe.ErrInvalidPath; a nil s, an error matching
// recipe.ErrBadOption. Nothing is sent to the server.
func NewValue(s *Session, name string) (*Value, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return &Value{s: s, name: name, key: valueKey(s.prefix, name)}, nil
}

// valueKey is the key of the value name under prefix (a leading "/" of
// name dropped, as for locks).
func valueKey(prefix, name string) string {
	return prefix + "/" + strings.TrimPrefix(name, "/") + "/" + valueElement
}

// Name returns the value's name as given to NewValue.
func (v *Value) Name() string { return v.name }

// Key returns the value's etcd key.
func (v *Value) Key() string { return v.key }

// Get reads the value with a linearizable read (recipe.Value.Get), retried
// on transient errors until ctx ends. Errors: ctx's cause,
// recipe.ErrSessionClosed, a *recipe.OpError from etcd.
func (v *Value) Get(ctx context.Context) (recipe.Versioned, error) {
	if ctx == nil {
		return recipe.Versioned{}, fmt.Errorf("%w: etcdlock: nil context", recipe.ErrBadOption)
	}
	ctx, cancel := v.s.life.Bind(ctx)
	defer cancel()
	resp, err := v.get(ctx)
	if err != nil {
		return recipe.Versioned{}, err
	}
	return fromGet(resp), nil
}

// get reads the key, linearizable, retrying transient errors and tries
// that get no answer.
func (v *Value) get(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	s := v.s
	b := loop.BackOff(retryFirst, retryMax)
	for {
		var resp *clientv3.GetResponse
		unanswered, err := try(ctx, attemptTimeout(s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = s.cli.Get(ctx, v.key, opts...)
			return err
		})
		switch {
		case err == nil:
			return resp, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case unanswered:
			continue
		case !transient(err):
			return nil, opError("get", v.key, err)
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// fromGet is the value a read of the key shows.
func fromGet(resp *clientv3.GetResponse) recipe.Versioned {
	if len(resp.Kvs) == 0 {
		return recipe.Versioned{Rev: resp.Header.Revision}
	}
	return fromKV(resp.Kvs[0])
}

// fromKV is the value kv holds.
func fromKV(kv *mvccpb.KeyValue) recipe.Versioned {
	data := kv.Value
	if data == nil {
		data = []byte{}
	}
	return recipe.Versioned{Data: data, Version: kv.ModRevision, Rev: kv.ModRevision}
}

// TrySet writes data if the value's Version is still expected
// (recipe.Value.TrySet): one transaction that puts the key if its mod
// revision is expected (with 0: if its create revision is 0, the key
// missing). A try that gets no answer, or a transient error, is settled by
// reading the key, and if it changed, its history (see Caches and values in
// the package documentation): never a guess. Errors: recipe.ErrConflict
// (nothing written); recipe.ErrTooLarge over MaxValueData;
// recipe.ErrBadOption for a negative expected; ctx's cause (after a send
// the put may have applied: Get tells); recipe.ErrSessionClosed; a
// *recipe.OpError.
func (v *Value) TrySet(ctx context.Context, expected int64, data []byte) (recipe.Versioned, error) {
	switch {
	case expected < 0:
		return recipe.Versioned{}, fmt.Errorf("%w: etcdlock: expected version %d", recipe.ErrBadOption, expected)
	case len(data) > MaxValueData:
		return recipe.Versioned{}, fmt.Errorf("%w: etcdlock: value data of %d bytes, over MaxValueData (%d)", recipe.ErrTooLarge, len(data), MaxValueData)
	case ctx == nil:
		return recipe.Versioned{}, fmt.Errorf("%w: etcdlock: nil context", recipe.ErrBadOption)
	case ctx.Err() != nil:
		return recipe.Versioned{}, context.Cause(ctx)
	}
	data = append([]byte{}, data...) // the caller may reuse its slice; never nil: nil Data means absent
	ctx, cancel := v.s.life.Bind(ctx)
	defer cancel()
	b := loop.BackOff(retryFirst, retryMax)
	for unknown := false; ; unknown = true {
		var resp *clientv3.TxnResponse
		unanswered, err := try(ctx, attemptTimeout(v.s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = v.s.cli.Txn(ctx).If(v.compare(expected)).Then(clientv3.OpPut(v.key, string(data))).
				Else(clientv3.OpGet(v.key)).Commit()
			return err
		})
		switch {
		case err == nil && resp.Succeeded:
			return recipe.Versioned{Data: data, Version: resp.Header.Revision, Rev: resp.Header.Revision}, nil
		case err == nil && !unknown:
			return recipe.Versioned{}, v.conflict(expected, resp.Responses[0].GetResponseRange().Kvs)
		case err == nil:
			// Refused after an earlier try's outcome was unknown: that try
			// may be what moved the key (applied late). Settle it.
		case ctx.Err() != nil:
			return recipe.Versioned{}, v.unconfirmed(ctx, err)
		case !unanswered && !transient(err):
			return recipe.Versioned{}, opError("put", v.key, err)
		}
		got, done, err := v.settle(ctx, expected, data)
		if done {
			return got, err
		}
		if !unanswered && loop.Pause(ctx, b, retryMax) != nil {
			return recipe.Versioned{}, v.unconfirmed(ctx, nil)
		}
	}
}

// compare is TrySet's condition.
func (v *Value) compare(expected int64) clientv3.Cmp {
	if expected == 0 {
		return clientv3.Compare(clientv3.CreateRevision(v.key), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(v.key), "=", expected)
}

// conflict is TrySet's error when the key is not at expected (kvs: the
// key as the transaction read it).
func (v *Value) conflict(expected int64, kvs []*mvccpb.KeyValue) error {
	found := "missing"
	if len(kvs) > 0 {
		found = fmt.Sprintf("at mod revision %d", kvs[0].ModRevision)
	}
	return opError("put", v.key, fmt.Errorf("%w: value expected at version %d, found %s", recipe.ErrConflict, expected, found))
}

// settle reads the key after a try whose outcome is unknown (see TrySet):
// done with TrySet's result when the put was applied or cannot be, not
// done when the key is unchanged (send again).
func (v *Value) settle(ctx context.Context, expected int64, data []byte) (_ recipe.Versioned, done bool, _ error) {
	resp, err := v.get(ctx)
	if err != nil {
		return recipe.Versioned{}, true, v.unconfirmed(ctx, err)
	}
	switch {
	case len(resp.Kvs) == 0 && expected == 0:
		return recipe.Versioned{}, false, nil
	case len(resp.Kvs) == 0:
		return recipe.Versioned{}, true, v.conflict(expected, nil)
	case resp.Kvs[0].ModRevision == expected:
		return recipe.Versioned{}, false, nil
	}
	next, err := v.following(ctx, expected, resp.Kvs[0])
	switch {
	case err != nil:
		return recipe.Versioned{}, true, v.unconfirmed(ctx, err)
	case next != nil && bytes.Equal(next.Value, data):
		return recipe.Versioned{Data: data, Version: next.ModRevision, Rev: next.ModRevision}, true, nil
	}
	return recipe.Versioned{}, true, v.conflict(expected, resp.Kvs)
}

// maxWalk bounds the writes settle looks back through.
const maxWalk = 16

// following returns the write of the key that followed its state at
// expected (for 0: the first write of cur's incarnation, its create), as
// the key's history holds it, walking back from cur; nil when there is
// none (expected was not a revision of the key, or the key was deleted
// after it). Errors: a compacted history, more than maxWalk writes since,
// the reads'.
func (v *Value) following(ctx context.Context, expected int64, cur *mvccpb.KeyValue) (*mvccpb.KeyValue, error) {
	if expected == 0 {
		if cur.Version == 1 {
			return cur, nil
		}
		resp, err := v.get(ctx, clientv3.WithRev(cur.CreateRevision))
		if err != nil || len(resp.Kvs) == 0 {
			return nil, err
		}
		return resp.Kvs[0], nil
	}
	for range maxWalk {
		if cur.ModRevision < expected || cur.Version == 1 {
			return nil, nil // expected is not in this incarnation's history
		}
		resp, err := v.get(ctx, clientv3.WithRev(cur.ModRevision-1))
		switch {
		case err != nil:
			return nil, err
		case len(resp.Kvs) == 0:
			return nil, nil
		case resp.Kvs[0].ModRevision == expected:
			return cur, nil
		}
		cur = resp.Kvs[0]
	}
	return nil, fmt.Errorf("more than %d writes of the key since the revision expected", maxWalk)
}

// unconfirmed is TrySet's error when settling a try failed: the put may
// have applied.
func (v *Value) unconfirmed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	} else if errors.Is(err, rpctypes.ErrCompacted) {
		err = fmt.Errorf("the history that tells is compacted: %w", err)
	}
	return opError("put", v.key, fmt.Errorf("unconfirmed (Get tells whether it applied): %w", err))
}

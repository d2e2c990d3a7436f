package fenceetcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/fence"
)

// tokenWidth is the width of a token in a key's value: every token up to
// fence.MaxToken+1 (2^63) has 19 decimal digits, so zero-padded to 19 the
// byte order of the text is the order of the numbers, which is the order
// etcd's value comparison uses.
const tokenWidth = 19

// pad is t as tokenWidth digits.
func pad(t uint64) string { return fmt.Sprintf("%0*d", tokenWidth, t) }

// parseToken reads the tokenWidth digits at the start of v.
func parseToken(v []byte) (fence.Token, bool) {
	if len(v) < tokenWidth {
		return 0, false
	}
	for _, c := range v[:tokenWidth] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(string(v[:tokenWidth]), 10, 64)
	if err != nil || fence.Token(n) > fence.MaxToken {
		return 0, false
	}
	return fence.Token(n), true
}

// outcome is what one guarded transaction found and did.
type outcome struct {
	ok       bool              // put and ops applied
	prev     []byte            // the key's value before (nil: absent); when !ok, its value now
	revision int64             // the transaction's revision
	resps    []*pb.ResponseOp  // the responses to ops
	kv       *pb.RangeResponse // when !ok: the read of the key
}

// guarded runs put (a put of key carrying token t) and ops in one etcd
// transaction, applied only if key is absent or its value is below bound
// (pad(t+1) for "stored token ≤ t"); otherwise it reads key. A missing key
// needs a transaction of its own (etcd's value comparison fails on a
// missing key), nested in the outer one's else branch: one round trip, one
// revision, still atomic.
func guarded(ctx context.Context, kv clientv3.KV, key, bound string, put clientv3.Op, ops []clientv3.Op) (outcome, error) {
	if err := ctx.Err(); err != nil {
		return outcome{}, err // nothing sent
	}
	then := append([]clientv3.Op{put}, ops...)
	missing := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "<", bound)).
		Then(then...).
		Else(clientv3.OpTxn([]clientv3.Cmp{missing}, then, []clientv3.Op{clientv3.OpGet(key)})).
		Commit()
	if err != nil {
		return outcome{}, classify(err)
	}
	out := outcome{ok: resp.Succeeded, revision: resp.Header.GetRevision(), resps: resp.Responses}
	if !out.ok {
		inner := resp.Responses[0].GetResponseTxn()
		if !inner.GetSucceeded() {
			out.kv = inner.Responses[0].GetResponseRange()
			if len(out.kv.Kvs) > 0 {
				out.prev = out.kv.Kvs[0].Value
			}
			return out, nil
		}
		out.ok, out.resps = true, inner.Responses // created: no previous value
	} else if p := out.resps[0].GetResponsePut().GetPrevKv(); p != nil {
		out.prev = p.Value
	}
	out.resps = out.resps[1:]
	return out, nil
}

// classify turns a failed transaction's error into fence.ErrUncertain
// unless it is etcd's refusal (nothing applied): a lost connection, a
// timeout or a cancelled ctx while the request was out, a leader change
// after the proposal, all may have been applied.
func classify(err error) error {
	code := codes.Unknown
	if s, ok := status.FromError(err); ok {
		code = s.Code()
	}
	var coded interface{ Code() codes.Code } // etcd's rpctypes.EtcdError
	if errors.As(err, &coded) {
		code = coded.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated,
		codes.OutOfRange, codes.AlreadyExists, codes.NotFound, codes.Unimplemented:
		return fmt.Errorf("fenceetcd: refused by etcd, nothing applied: %w", err)
	}
	return fmt.Errorf("%w: fenceetcd: the transaction's answer was lost (it may have been applied): %w", fence.ErrUncertain, err)
}

// checkToken refuses the zero token and one above fence.MaxToken, before
// anything is sent, as every fence does.
func checkToken(t fence.Token) error {
	if t.IsZero() {
		return fence.ErrNoToken
	}
	return fence.CheckToken(t)
}

// errNotOurs wraps a value of another format found at key.
func errNotOurs(what error, key string, v []byte) error {
	return fmt.Errorf("%w: %q holds %.40q", what, key, v)
}

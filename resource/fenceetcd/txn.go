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
	ok       bool             // put and ops applied
	prev     []byte           // the key's value before; when !ok, its value now
	revision int64            // the transaction's revision
	resps    []*pb.ResponseOp // the responses to ops
}

// guarded runs put (a put of key carrying token t) and ops in one etcd
// transaction, applied only if key's value is below bound (pad(t+1) for
// "stored token ≤ t"); otherwise it reads key. etcd's value comparison
// fails on a missing key, so a missing key (a resource's first use) is
// first created holding empty, the zero token, in a transaction of its
// own, and the comparison made again: the caller's ops are sent once, and
// a missing key costs one round trip more, once.
func guarded(ctx context.Context, kv clientv3.KV, key, bound, empty string, put clientv3.Op, ops []clientv3.Op) (outcome, error) {
	then := append([]clientv3.Op{put}, ops...)
	for {
		if err := ctx.Err(); err != nil {
			return outcome{}, err // nothing sent
		}
		resp, err := kv.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "<", bound)).
			Then(then...).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return outcome{}, classify(err)
		}
		out := outcome{ok: resp.Succeeded, revision: resp.Header.GetRevision()}
		if out.ok {
			if p := resp.Responses[0].GetResponsePut().GetPrevKv(); p != nil {
				out.prev = p.Value
			}
			out.resps = resp.Responses[1:]
			return out, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			out.prev = kvs[0].Value
			return out, nil
		}
		// Missing: create it (unless someone just did), then compare.
		_, err = kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, empty)).
			Commit()
		if err != nil {
			// Not uncertain: the caller's ops were not sent.
			return outcome{}, fmt.Errorf("fenceetcd: creating %q with the zero token: %w", key, err)
		}
	}
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

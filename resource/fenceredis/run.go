package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
)

// run runs script (EVALSHA, and EVAL when the server does not have it
// cached) and classifies a failure: Redis's error reply (nothing applied:
// every script checks before it writes, and reports a failure after its
// first write in its answer, see scripts.go), an ACL refusal among them
// (*PermissionError), a request never sent, or a lost answer
// (fence.ErrUncertain).
func run(ctx context.Context, cli *redis.Client, script *redis.Script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	res, err := script.Run(ctx, cli, keys, args...).Result()
	if err == nil {
		return res, nil
	}
	var re redis.Error
	switch msg := err.Error(); {
	case errors.As(err, &re) && strings.Contains(msg, "fenceredis: not a fence"):
		return nil, fmt.Errorf("%w: %s", ErrNotFence, msg)
	case errors.As(err, &re) && strings.HasPrefix(msg, "WRONGTYPE fenceredis"):
		return nil, fmt.Errorf("%w: %s", ErrWrongType, msg)
	case errors.As(err, &re) && permissionError(msg, err) != nil:
		return nil, permissionError(msg, err)
	case errors.As(err, &re):
		return nil, fmt.Errorf("fenceredis: refused by Redis, nothing applied: %w", err)
	case notSent(err):
		return nil, fmt.Errorf("fenceredis: not sent: %w", err)
	}
	return nil, fmt.Errorf("%w: fenceredis: the script's answer was lost (it may have been applied): %w", fence.ErrUncertain, err)
}

// notSent reports whether err says the request never left: the client is
// closed, no connection could be had from the pool, or the dial failed.
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		errors.As(err, &op) && op.Op == "dial"
}

// answer reads a script's {flag, fields...} reply: ok is the flag, and
// fields the n strings after it.
func answer(res any, n int) (ok bool, fields []string, err error) {
	a, _ := res.([]any)
	if len(a) != n {
		return false, nil, fmt.Errorf("fenceredis: unexpected reply %T of %d items", res, len(a))
	}
	flag, _ := a[0].(int64)
	for _, f := range a[1:] {
		s, isStr := f.(string)
		if !isStr {
			return false, nil, fmt.Errorf("fenceredis: unexpected reply item %T", f)
		}
		fields = append(fields, s)
	}
	return flag == 1, fields, nil
}

// parseToken parses a token the script checked ("" is none).
func parseToken(s string) (fence.Token, error) {
	if s == "" {
		return 0, nil
	}
	t, err := fence.ParseToken(s)
	if err != nil {
		return 0, fmt.Errorf("fenceredis: unexpected token in a reply: %w", err)
	}
	return t, nil
}

// PartialError is Do's error when its script stored the token and then a
// write failed (on Redis 6, whose scripts cannot check the ACL before
// they write; or a failure no check foresaw): the script stopped there.
// The token and the first Applied writes landed, the others did not. It
// matches fence.ErrUncertain, as Do's outcome is not what was asked (and
// recipe.ErrNoPermission when the ACL refused the write); a holder of an
// older token is still refused.
type PartialError struct {
	Resource string
	Token    fence.Token
	Applied  int    // the writes that landed, Do's writes[:Applied]
	Failed   string // writes[Applied], as Write.String shows it
	Err      error  // the server's answer to it
}

// Error names what landed and the write that failed.
func (e *PartialError) Error() string {
	return fmt.Sprintf("fenceredis: %s: token %s of %q and its first %d writes stored, then write %d (%s) failed, the later ones not applied: %v",
		fence.ErrUncertain, e.Token, e.Resource, e.Applied, e.Applied, e.Failed, e.Err)
}

// Unwrap returns fence.ErrUncertain and the server's answer, as a
// *PermissionError if it is an ACL refusal.
func (e *PartialError) Unwrap() []error { return []error{fence.ErrUncertain, e.Err} }

// partial reads doScript's {2, previous token, m, error} answer.
func partial(a []any, resource string, token fence.Token, writes []Write) (fence.Token, error) {
	m, _ := a[2].(int64)
	msg, _ := a[3].(string)
	if m < 0 || int(m) >= len(writes) {
		return 0, fmt.Errorf("%w: fenceredis: unexpected partial reply (%d of %d writes)", fence.ErrUncertain, m, len(writes))
	}
	err := errors.New(msg)
	if perr := permissionError(msg, err); perr != nil {
		err = perr
	}
	return 0, &PartialError{Resource: resource, Token: token, Applied: int(m), Failed: writes[m].String(), Err: err}
}

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
// every script checks before it writes), a request never sent, or a lost
// answer (fence.ErrUncertain).
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

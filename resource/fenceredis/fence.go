package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Errors of this package, matched with errors.Is. Bad input is refused
// before anything is sent.
var (
	// ErrBadPrefix: New's key prefix is empty or not valid UTF-8.
	ErrBadPrefix = errors.New("fenceredis: bad key prefix")
	// ErrNotFence: the key holds something this package did not write
	// (another type, or a value that is not a token): another program's
	// key, or a prefix typo. Nothing was written.
	ErrNotFence = errors.New("fenceredis: key does not hold a fence token")
	// ErrWrongType: a Write's key holds another type than its command
	// needs (an HSET of a list, say); nothing was written.
	ErrWrongType = errors.New("fenceredis: a write's key holds the wrong type")
	// ErrRetries: the client repeats commands whose answer was lost
	// (go-redis's MaxRetries, 3 by default): a fenced write could be applied
	// twice, and its outcome misreported. Create the client with
	// MaxRetries: -1.
	ErrRetries = errors.New("fenceredis: the client retries commands (set redis.Options.MaxRetries to -1)")
)

// Fence keeps, for each resource, the highest fencing token accepted in
// the Redis string prefix+resource, and applies a caller's writes only
// together with a token at least that high, in one Lua script. It is for
// a single Redis server (or a primary with its replicas, see the package
// documentation). It is safe for concurrent use.
type Fence struct {
	cli    *redis.Client
	prefix string
	rights rights
	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token: wire recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// New returns the fence whose keys are prefix+resource. Give the fence a
// prefix of its own ("myapp:fence:"): writes of keys under it are refused
// (ErrBadWrite). It sends nothing. Errors: ErrBadPrefix; ErrRetries for a
// client that retries commands.
func New(cli *redis.Client, prefix string) (*Fence, error) {
	if prefix == "" || !utf8.ValidString(prefix) {
		return nil, fmt.Errorf("%w: %q", ErrBadPrefix, prefix)
	}
	if err := checkClient(cli); err != nil {
		return nil, err
	}
	f := &Fence{cli: cli, prefix: prefix}
	f.rights = rights{cmds: []string{"TYPE", "GET", "SET"}}
	return f, nil
}

// checkClient refuses a client that retries (after NewClient, a
// MaxRetries of 0 means none: -1 was normalised to it).
func checkClient(cli *redis.Client) error {
	if cli.Options().MaxRetries != 0 {
		return ErrRetries
	}
	return nil
}

// Key returns the Redis key that holds resource's highest token. Errors:
// an error matching fence.ErrBadResource for a name fence.CheckResource
// refuses (empty, over fence.MaxResourceLen bytes, not UTF-8, a NUL byte).
func (f *Fence) Key(resource string) (string, error) {
	if err := fence.CheckResource(resource); err != nil {
		return "", err
	}
	return f.prefix + resource, nil
}

// Do applies writes in one Lua script with the set of token as resource's
// highest, if token is not lower than the highest accepted, and returns
// the highest accepted before (zero: none). The writes land only with the
// token, and none of them otherwise (a *fence.StaleError with the highest
// accepted). An equal token is accepted; empty writes only record token;
// each key may be written once per call, and not under the fence's prefix.
// After an error nothing was applied, unless it matches fence.ErrUncertain
// (see Errors in the package documentation).
func (f *Fence) Do(ctx context.Context, resource string, token fence.Token, writes ...Write) (prev fence.Token, err error) {
	prev, err = f.checkedDo(ctx, resource, token, writes)
	return prev, fence.Reported(err, nil, f.OnStale)
}

// checkedDo is Do without the report of a stale token.
func (f *Fence) checkedDo(ctx context.Context, resource string, token fence.Token, writes []Write) (fence.Token, error) {
	for i, w := range writes {
		if err := w.check(); err != nil {
			return 0, fmt.Errorf("write %d: %w", i, err)
		}
	}
	return f.do(ctx, resource, token, writes)
}

// do is Do after each Write's own check.
func (f *Fence) do(ctx context.Context, resource string, token fence.Token, writes []Write) (fence.Token, error) {
	key, err := f.Key(resource)
	if err != nil {
		return 0, err
	}
	if err := checkToken(token); err != nil {
		return 0, err
	}
	keys := []string{key}
	args := []any{token.String(), len(writes)}
	seen := map[string]bool{}
	for i, w := range writes {
		if strings.HasPrefix(w.key, f.prefix) || seen[w.key] {
			return 0, fmt.Errorf("write %d: %w: %s is under the fence's prefix, or written twice", i, ErrBadWrite, w)
		}
		seen[w.key] = true
		keys = append(keys, w.key)
		args = append(args, w.cmd, len(w.args))
		for _, a := range w.args {
			args = append(args, a)
		}
	}
	if err := f.rights.check(ctx, f.cli, key); err != nil {
		return 0, err
	}
	res, err := run(ctx, f.cli, doScript, keys, args...)
	if err != nil {
		return 0, nameWrite(err, writes)
	}
	return doAnswer(res, resource, token, writes)
}

// nameWrite completes the Right of the *PermissionError of a write the
// script's ACL check refused ("write 1, RPUSH of a key") with the write.
func nameWrite(err error, writes []Write) error {
	var perr *PermissionError
	var i int
	if errors.As(err, &perr) {
		if _, serr := fmt.Sscanf(perr.Right, "write %d,", &i); serr == nil && i >= 0 && i < len(writes) {
			perr.Right = fmt.Sprintf("write %d, %s", i, writes[i])
		}
	}
	return err
}

// doAnswer reads doScript's answer.
func doAnswer(res any, resource string, token fence.Token, writes []Write) (fence.Token, error) {
	if a, _ := res.([]any); len(a) == 4 {
		if flag, _ := a[0].(int64); flag == 2 {
			return partial(a, resource, token, writes)
		}
	}
	ok, fields, err := answer(res, 2)
	if err != nil {
		return 0, err
	}
	high, err := parseToken(fields[0])
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, &fence.StaleError{Resource: resource, Token: token, Highest: high}
	}
	return high, nil
}

// Highest returns the highest token accepted for resource (zero if none).
// Errors: fence.ErrBadResource (see Key), ErrNotFence, a *PermissionError
// (the first call checks the fence's rights), Redis's.
func (f *Fence) Highest(ctx context.Context, resource string) (fence.Token, error) {
	key, err := f.Key(resource)
	if err != nil {
		return 0, err
	}
	if err := f.rights.check(ctx, f.cli, key); err != nil {
		return 0, err
	}
	v, err := f.cli.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return 0, fmt.Errorf("%w: %s", ErrNotFence, err)
		}
		return 0, readError(key, err)
	}
	t, perr := fence.ParseToken(v)
	if perr != nil || t > fence.MaxToken {
		return 0, fmt.Errorf("%w: %q holds %.40q", ErrNotFence, key, v)
	}
	return t, nil
}

// checkToken refuses the zero token and one above fence.MaxToken, before
// anything is sent, as every fence does.
func checkToken(t fence.Token) error {
	if t.IsZero() {
		return fence.ErrNoToken
	}
	return fence.CheckToken(t)
}

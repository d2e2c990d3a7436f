package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
)

// ErrBadKey is returned for an empty register key.
var ErrBadKey = errors.New("fenceredis: bad register key")

// Value is a register's content.
type Value struct {
	Token   fence.Token // the highest token accepted (zero: none yet)
	Data    []byte      // the value of the last accepted write
	Version int64       // the number of changes the register has had; 0 if it does not exist
}

// Register is a value and the highest token accepted for it in one Redis
// hash (fields token, value and version). A write lands only with a token
// at least the stored one, checked and applied in one Lua script. It is
// safe for concurrent use.
type Register struct {
	cli    *redis.Client
	key    string
	rights rights
	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token: wire recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// NewRegister returns the register in key. It sends nothing. Errors:
// ErrBadKey for an empty key; ErrRetries for a client that retries.
func NewRegister(cli *redis.Client, key string) (*Register, error) {
	if key == "" {
		return nil, ErrBadKey
	}
	if err := checkClient(cli); err != nil {
		return nil, err
	}
	return &Register{cli: cli, key: key, rights: rights{cmds: []string{"TYPE", "HMGET", "HSET"}}}, nil
}

// Key returns the register's Redis key.
func (r *Register) Key() string { return r.key }

// Read returns the register's content: the zero Value if its key does not
// exist. Errors: ErrNotFence for another type or hash, a *PermissionError
// (the first call checks the register's rights), Redis's.
func (r *Register) Read(ctx context.Context) (Value, error) {
	if err := r.rights.check(ctx, r.cli, r.key); err != nil {
		return Value{}, err
	}
	vals, err := r.cli.HMGet(ctx, r.key, "token", "value", "version").Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return Value{}, fmt.Errorf("%w: %q is not a hash", ErrNotFence, r.key)
		}
		return Value{}, readError(r.key, err)
	}
	if vals[0] == nil && vals[1] == nil && vals[2] == nil {
		return Value{}, nil
	}
	f := make([]string, 3)
	for i, v := range vals {
		f[i], _ = v.(string)
	}
	return r.decode(f)
}

// Write stores data with token if token is not lower than the register's,
// and returns what it replaced (the zero Value for a missing register):
// the register's version is then prev.Version+1. An equal token is
// accepted; a lower one gets a *fence.StaleError (fence.ErrStale) with the
// stored token, nothing written. Its other errors (fence.ErrNoToken,
// ErrNotFence, fence.ErrUncertain, ...) are listed under Errors in the
// package documentation.
func (r *Register) Write(ctx context.Context, token fence.Token, data []byte) (prev Value, err error) {
	if err := checkToken(token); err != nil {
		return Value{}, err
	}
	ok, cur, err := r.run(ctx, token.String(), string(data))
	if err != nil {
		return Value{}, err
	}
	if !ok {
		return cur, fence.Reported(&fence.StaleError{Resource: r.key, Token: token, Highest: cur.Token}, nil, r.OnStale)
	}
	return cur, nil
}

// RaiseFloor makes floor the lowest token the register accepts from now
// on: its token becomes max(token, floor) and its data stays, in one
// script (a missing register is created empty). It returns the token now
// stored; it never lowers it, and a zero floor changes nothing. It is the
// operator's step of a switch of lock backend (docs/backends.md).
// Errors: a *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor (fence.CheckFloor); ErrNotFence; fence.ErrUncertain
// (call again); Redis's.
func (r *Register) RaiseFloor(ctx context.Context, floor fence.Token) (fence.Token, error) {
	if err := fence.CheckFloor(floor); err != nil {
		return 0, err
	}
	if floor.IsZero() {
		v, err := r.Read(ctx)
		return v.Token, err
	}
	ok, cur, err := r.run(ctx, floor.String())
	if err != nil {
		return 0, err
	}
	if ok {
		return floor, nil
	}
	return cur.Token, nil
}

// run runs registerScript: ok says it wrote; cur is the state before.
func (r *Register) run(ctx context.Context, args ...any) (ok bool, cur Value, err error) {
	if err := r.rights.check(ctx, r.cli, r.key); err != nil {
		return false, Value{}, err
	}
	res, err := run(ctx, r.cli, registerScript, []string{r.key}, args...)
	if err != nil {
		return false, Value{}, err
	}
	ok, f, err := answer(res, 4)
	if err != nil {
		return false, Value{}, err
	}
	if f[0] == "" { // no register yet
		return ok, Value{}, nil
	}
	cur, err = r.decode(f)
	return ok, cur, err
}

// decode reads the fields token, value, version.
func (r *Register) decode(f []string) (Value, error) {
	t, err := fence.ParseToken(f[0])
	ver, verr := strconv.ParseInt(f[2], 10, 64)
	if err != nil || verr != nil || t > fence.MaxToken {
		return Value{}, fmt.Errorf("%w: %q is another hash", ErrNotFence, r.key)
	}
	return Value{Token: t, Data: []byte(f[1]), Version: ver}, nil
}

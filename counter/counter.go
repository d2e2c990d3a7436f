// Package counter is a shared counter over any recipe.Value (Curator's
// SharedCount and DistributedAtomicLong, kazoo's Counter): a signed 64-bit
// integer that many processes read and add to, with compare-and-set. It
// imports package recipe only: give it a ZooKeeper value (package value)
// or an etcd one (etcdlock.NewValue).
//
// # Encoding
//
// The count is stored as decimal ASCII text: an optional '-' and 1 to 19
// digits, no sign for zero, no leading zero, nothing else ("0", "42",
// "-7"), so that any tool can read and write it (zkCli's get, etcdctl
// get). A missing value counts 0. Data in any other form (Curator's
// SharedCount writes a 4-byte big-endian integer) is not read as a count:
// Get and Add fail with a *ParseError (ErrNotCounter) and write nothing.
//
// # Add
//
// Add reads the value and writes the sum with TrySet at the version it
// read; on recipe.ErrConflict (another writer came first) it reads again
// and retries, backing off (from 2 ms, doubling to 200 ms, with jitter)
// until it succeeds or ctx ends. Every Add that returns nil is counted
// exactly once, but for one case inherited from the Values' settling of
// a lost reply: when the reply to an Add's write is lost and another
// writer wrote the very same count over the very same version meanwhile
// (two Adds of the same delta from the same count), the Value cannot tell
// the two writes apart and reports both as applied, so one increment is
// lost. It takes a lost reply (a connection cut right after a send)
// during such a race.
package counter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Errors of a counter. Each matches with errors.Is.
var (
	// ErrNotCounter is matched by a *ParseError: the value holds data that
	// is not a count in the package's encoding.
	ErrNotCounter = errors.New("recipe: counter: the value is not a count")

	// ErrOverflow is returned by Add when the sum would not fit in an
	// int64: nothing is written.
	ErrOverflow = errors.New("recipe: counter: sum out of the int64 range")
)

// ParseError reports a value whose data is not a count (ErrNotCounter).
type ParseError struct {
	// Data is the value's data, at most its first 32 bytes.
	Data []byte
	// Len is the data's length in bytes.
	Len int
	// Version is the version of the value that holds it.
	Version int64
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("recipe: counter: the value (version %d, %d bytes: %q) is not a count in decimal text", e.Version, e.Len, e.Data)
}

// Is reports whether target is ErrNotCounter.
func (e *ParseError) Is(target error) bool { return target == ErrNotCounter }

// Count is a counter's content at one version of its Value.
type Count struct {
	// N is the count (0 for a missing value).
	N int64
	// Version is the Value's version (0: missing), for TrySet.
	Version int64
	// Rev is the Value's Rev (recipe.Versioned).
	Rev int64
}

// Counter is a shared count stored in a recipe.Value. Its methods are safe
// for concurrent use.
type Counter struct {
	v recipe.Value
}

// New returns the counter stored in v. It sends nothing.
func New(v recipe.Value) *Counter { return &Counter{v: v} }

// Get returns the count, read with the Value's Get (at least as new as any
// write completed before the call). Errors: a *ParseError (ErrNotCounter);
// recipe.ErrBadOption for a Counter without a Value; the Value's.
func (c *Counter) Get(ctx context.Context) (int64, error) {
	n, err := c.Read(ctx)
	return n.N, err
}

// Read returns the count with the version and Rev of the Value that holds
// it. Errors: as Get.
func (c *Counter) Read(ctx context.Context) (Count, error) {
	if c.v == nil {
		return Count{}, fmt.Errorf("%w: counter without a value", recipe.ErrBadOption)
	}
	x, err := c.v.Get(ctx)
	if err != nil {
		return Count{}, err
	}
	return Decode(x)
}

// Add adds delta (which may be negative; 0 only reads) to the count and
// returns the new count: reads, then TrySet at the version read, again
// after every recipe.ErrConflict with backoff, until ctx ends (see the
// package doc).
// Errors: ErrOverflow (nothing written); a *ParseError (ErrNotCounter);
// recipe.ErrBadOption for a Counter without a Value; ctx's cause; the
// Value's other errors.
func (c *Counter) Add(ctx context.Context, delta int64) (int64, error) {
	b := backoff{next: firstPause}
	for {
		cur, err := c.Read(ctx)
		if err != nil {
			return 0, err
		}
		if delta == 0 {
			return cur.N, nil
		}
		if delta > 0 && cur.N > math.MaxInt64-delta || delta < 0 && cur.N < math.MinInt64-delta {
			return 0, fmt.Errorf("%w: %d + %d", ErrOverflow, cur.N, delta)
		}
		got, err := c.TrySet(ctx, cur.Version, cur.N+delta)
		if err == nil {
			return got.N, nil
		}
		if !errors.Is(err, recipe.ErrConflict) {
			return 0, err
		}
		if err := b.pause(ctx); err != nil {
			return 0, err
		}
	}
}

// TrySet writes n if the Value's version is still expected (0: only if the
// value is missing), with the Value's TrySet, and returns what was
// written. Errors: recipe.ErrConflict when the version differs (nothing
// written); recipe.ErrBadOption for a Counter without a Value; the
// Value's.
func (c *Counter) TrySet(ctx context.Context, expected, n int64) (Count, error) {
	if c.v == nil {
		return Count{}, fmt.Errorf("%w: counter without a value", recipe.ErrBadOption)
	}
	x, err := c.v.TrySet(ctx, expected, Encode(n))
	if err != nil {
		return Count{}, err
	}
	return Count{N: n, Version: x.Version, Rev: x.Rev}, nil
}

// Encode returns n in the package's encoding (decimal ASCII text).
func Encode(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// Decode returns the count x holds: 0 for a missing value (Version 0).
// Errors: a *ParseError (ErrNotCounter) for data not in the package's
// encoding.
func Decode(x recipe.Versioned) (Count, error) {
	if x.Version == 0 {
		return Count{Rev: x.Rev}, nil
	}
	n, ok := parse(x.Data)
	if !ok {
		shown := x.Data
		if len(shown) > 32 {
			shown = shown[:32]
		}
		return Count{}, &ParseError{Data: append([]byte(nil), shown...), Len: len(x.Data), Version: x.Version}
	}
	return Count{N: n, Version: x.Version, Rev: x.Rev}, nil
}

// parse reads the encoding exactly: strconv.ParseInt would also take "+1",
// "007" and "-0".
func parse(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || string(Encode(n)) != string(b) {
		return 0, false
	}
	return n, true
}

// Add's pauses after a conflict: from firstPause, doubling to maxPause,
// each drawn at random between half and all of it.
const (
	firstPause = 2 * time.Millisecond
	maxPause   = 200 * time.Millisecond
)

// backoff is one Add's pauses.
type backoff struct{ next time.Duration }

// pause waits for the next pause, or until ctx ends (its cause).
func (b *backoff) pause(ctx context.Context) error {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, maxPause)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

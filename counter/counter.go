// Package counter is a shared counter over any recipe.Value (Curator's
// SharedCount and DistributedAtomicLong, kazoo's Counter): a signed 64-bit
// integer that many processes read and add to, with compare-and-set. It
// imports package recipe only: give it a ZooKeeper value (package value)
// or an etcd one (etcdlock.NewValue).
//
// # Encoding
//
// The count is stored as decimal ASCII text: an optional '-' and 1 to 19
// digits, no sign for zero, no leading zero ("0", "42", "-7"). The
// counter writes it followed by a newline and a tag of 16 lowercase hex
// digits, drawn at random for every write ("42\n3f09c2d17a5b8e60"), and
// reads the count alone as well, with or without a final newline (a
// value written by hand or by older code), so that any tool can read and write it (zkCli's get, etcdctl
// get: the first line is the count). A missing value counts 0. Data in
// any other form (Curator's SharedCount writes a 4-byte big-endian
// integer; a tag of another length, a second newline) is not read as a
// count: Get and Add fail with a *ParseError (ErrNotCounter) and write
// nothing.
//
// The tag is what makes Add exact across a lost reply. A Value settles a
// write whose reply was lost by reading the value again and recognising
// the write by its bytes at the version it makes. Without a tag, two Adds
// of the same delta from the same count write the same bytes over the
// same version; if the one whose reply is lost is the one that lost the
// race, it would take the winner's write for its own and report success,
// and one increment would be lost. With a tag, no two writes have the
// same bytes (two tags agree with a chance of 2^-64): the loser sees another
// writer's bytes, gets recipe.ErrConflict and adds again.
//
// # Add
//
// Add reads the value and writes the sum (with a new tag) with TrySet at
// the version it read; on recipe.ErrConflict (another writer came first)
// it reads again and retries, backing off (from 2 ms, doubling to 200 ms,
// with jitter) until it succeeds or ctx ends. An Add that returns nil
// was applied, also when the reply to its write was lost (the tag); it is
// applied once as long as the Value keeps recipe.Value's promise that
// recipe.ErrConflict means nothing written, also for a write whose reply
// was lost and which was overwritten before the Value read it back.
package counter

import (
	"bytes"
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
	return fmt.Sprintf("recipe: counter: the value (version %d, %d bytes: %q) is not a count in decimal text (with an optional tag)", e.Version, e.Len, e.Data)
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
// written. Every call writes a new random tag with n (package doc).
// Errors: recipe.ErrConflict when the version differs (nothing written);
// recipe.ErrBadOption for a Counter without a Value; the Value's.
func (c *Counter) TrySet(ctx context.Context, expected, n int64) (Count, error) {
	if c.v == nil {
		return Count{}, fmt.Errorf("%w: counter without a value", recipe.ErrBadOption)
	}
	x, err := c.v.TrySet(ctx, expected, EncodeTagged(n, rand.Uint64()))
	if err != nil {
		return Count{}, err
	}
	return Count{N: n, Version: x.Version, Rev: x.Rev}, nil
}

// tagDigits is the length of a tag: a uint64 in lowercase hex, zero-padded.
const tagDigits = 16

// Encode returns n in the package's encoding without a tag (decimal ASCII
// text): a count as written by hand, which Decode reads. The counter
// itself writes EncodeTagged's form.
func Encode(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// EncodeTagged returns n in the package's encoding with tag: the decimal
// count, a newline and tag as 16 lowercase hex digits.
func EncodeTagged(n int64, tag uint64) []byte {
	b := strconv.AppendInt(make([]byte, 0, 20+1+tagDigits), n, 10)
	b = append(b, '\n')
	for shift := 4 * (tagDigits - 1); shift >= 0; shift -= 4 {
		b = append(b, "0123456789abcdef"[tag>>shift&0xf])
	}
	return b
}

// Decode returns the count x holds: 0 for a missing value (Version 0).
// It reads the count alone (Encode) or with a tag (EncodeTagged).
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
// "007" and "-0"; after a newline, a tag of 16 lowercase hex digits, or
// nothing.
func parse(b []byte) (int64, bool) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		// A tag, or nothing: "42\n" is what printf '42\n' or an editor
		// writes by hand.
		if tag := b[i+1:]; len(tag) > 0 && !isTag(tag) {
			return 0, false
		}
		b = b[:i]
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || string(Encode(n)) != string(b) {
		return 0, false
	}
	return n, true
}

// isTag reports whether b is a tag: 16 lowercase hex digits.
func isTag(b []byte) bool {
	if len(b) != tagDigits {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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

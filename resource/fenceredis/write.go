package fenceredis

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrBadWrite is returned (wrapped, with the write's index) for a Write
// that is not one of this package's constructors', has arguments its
// command does not take, touches a key under the fence's prefix, or
// writes a key another Write of the same call writes.
var ErrBadWrite = errors.New("fenceredis: bad write")

// MaxWriteArgs is the most arguments one Write may carry (values, fields,
// members): Lua unpacks them onto its stack, which has a limit, and a
// script that failed there would leave the earlier writes applied.
const MaxWriteArgs = 1000

// MaxTTL is the longest TTL SetPX takes.
const MaxTTL = 100 * 365 * 24 * time.Hour

// Write is one Redis command applied with a fenced token: make it with
// Set, SetPX, Del, HSet, HDel, RPush, SAdd or SRem. The commands are a
// fixed list, checked in the script too, and each is applied only after
// the script has checked that none of them can fail (the key's type).
type Write struct {
	cmd  string
	key  string
	args []string
}

// Set is SET key value.
func Set(key, value string) Write { return Write{"SET", key, []string{value}} }

// SetPX is SET key value PX ttl (in milliseconds, at least 1, at most MaxTTL).
func SetPX(key, value string, ttl time.Duration) Write {
	ms := "invalid"
	if ttl >= time.Millisecond && ttl <= MaxTTL {
		ms = strconv.FormatInt(ttl.Milliseconds(), 10)
	}
	return Write{"SET", key, []string{value, "PX", ms}}
}

// Del is DEL key.
func Del(key string) Write { return Write{"DEL", key, nil} }

// HSet is HSET key field value [field value ...].
func HSet(key string, fieldValues ...string) Write { return Write{"HSET", key, fieldValues} }

// HDel is HDEL key field [field ...].
func HDel(key string, fields ...string) Write { return Write{"HDEL", key, fields} }

// RPush is RPUSH key value [value ...].
func RPush(key string, values ...string) Write { return Write{"RPUSH", key, values} }

// SAdd is SADD key member [member ...].
func SAdd(key string, members ...string) Write { return Write{"SADD", key, members} }

// SRem is SREM key member [member ...].
func SRem(key string, members ...string) Write { return Write{"SREM", key, members} }

// String shows the command and its key (not its values).
func (w Write) String() string { return fmt.Sprintf("%s %q (%d arguments)", w.cmd, w.key, len(w.args)) }

// check refuses a Write whose arguments its command does not take.
func (w Write) check() error {
	n := len(w.args)
	ok := n <= MaxWriteArgs && w.key != ""
	switch w.cmd {
	case "SET":
		ok = ok && (n == 1 || n == 3 && w.args[1] == "PX" && w.args[2] != "invalid")
	case "DEL":
		ok = ok && n == 0
	case "HSET":
		ok = ok && n >= 2 && n%2 == 0
	case "HDEL", "RPUSH", "SADD", "SREM":
		ok = ok && n >= 1
	default:
		return fmt.Errorf("%w: not made by this package's constructors", ErrBadWrite)
	}
	if !ok {
		return fmt.Errorf("%w: %s: an empty key, or arguments the command does not take (a TTL out of range, an odd field/value list, none, or over %d)",
			ErrBadWrite, w, MaxWriteArgs)
	}
	return nil
}

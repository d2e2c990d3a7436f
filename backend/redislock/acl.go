package redislock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// PermissionError is the error of Connect and NewSession when the server's
// access control (Redis ACL) refuses the session's user a right the locks
// need, and of Acquire, TryAcquire and Release when a right is refused
// later (revoked while the session runs). Right names it: "command
// ZPOPMIN", "keys zkrecipes:lock:*", "channels zkrecipes:lock:*", and so
// on; Err is the server's answer. It matches recipe.ErrNoPermission. The
// package documentation gives the ACL line that grants every right.
type PermissionError struct {
	Right string
	Err   error
}

// Error names the missing right and quotes the server's refusal (which may
// name the user, never the password).
func (e *PermissionError) Error() string {
	return "redislock: the Redis user lacks a right the locks need: " + e.Right +
		" (see the package documentation for the ACL line): " + e.Err.Error()
}

// Unwrap returns recipe.ErrNoPermission and the server's answer.
func (e *PermissionError) Unwrap() []error { return []error{recipe.ErrNoPermission, e.Err} }

// aclRefusal reports whether msg, an error reply, is a refusal of the
// server's ACL: "NOPERM ..." for a command sent by the client, "ERR The
// user executing the script can't ..." for one a script sent.
func aclRefusal(msg string) bool {
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "user executing the script can't")
}

// permissionError returns a *PermissionError for err if it is an ACL
// refusal (Right named by what, or guessed from the server's answer), or
// nil.
func (s *Session) permissionError(err error, what string) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) || !aclRefusal(re.Error()) {
		return nil
	}
	return &PermissionError{Right: s.rightOf(re.Error(), what), Err: err}
}

// rightOf names the right a refusal msg is about: the keys or channels of
// the session's prefix, or the command the server names ("... to run the
// 'evalsha' command"), else what.
func (s *Session) rightOf(msg, what string) string {
	switch {
	case strings.Contains(msg, "key"):
		return fmt.Sprintf("keys %s* (%s)", s.prefix, what)
	case strings.Contains(msg, "channel"):
		return fmt.Sprintf("channels %s* (%s)", s.prefix, what)
	}
	if _, rest, ok := strings.Cut(msg, "to run the '"); ok {
		if cmd, _, ok := strings.Cut(rest, "'"); ok {
			what = strings.ToUpper(cmd)
		}
	}
	return "command " + what
}

// probeScript runs every command the recipe's scripts run, as they run
// them, on a probe key and queue of the session's prefix (KEYS[1],
// KEYS[2]) and a probe channel (ARGV[1]), and returns {} or, at the first
// refusal, {command, the server's error}. It leaves nothing behind: the
// keys are deleted at the end, and expire within a second anyway.
var probeScript = redis.NewScript(`
local k, q, ch = KEYS[1], KEYS[2], ARGV[1]
local calls = {
  {'SET', k, '1', 'NX', 'PX', '1000'}, {'GET', k}, {'INCR', k},
  {'PEXPIRE', k, '1000'}, {'PTTL', k},
  {'ZADD', q, '1', 'm'}, {'PEXPIRE', q, '1000'}, {'PTTL', q}, {'ZSCORE', q, 'm'},
  {'ZRANGE', q, '0', '0'}, {'ZRANGE', q, '-1', '-1', 'WITHSCORES'},
  {'ZREM', q, 'm'}, {'ZPOPMIN', q}, {'PUBLISH', ch, 'probe'},
  {'DEL', k}, {'DEL', q},
}
for _, c in ipairs(calls) do
  local r = redis.pcall(unpack(c))
  if type(r) == 'table' and r.err then
    redis.pcall('DEL', k)
    redis.pcall('DEL', q)
    return {c[1], r.err}
  end
end
return {}
`)

// checkRights makes sure the server's ACL lets the session's user do what
// the locks do: EVAL and EVALSHA (go-redis sends a script by its hash and
// loads it with EVAL when the server does not know it), every command the
// scripts run on the keys of the prefix, PUBLISH, SUBSCRIBE and
// UNSUBSCRIBE on its channels. Rights are checked by using them, on a key
// and channel of the prefix nothing else uses, which works on every server
// version and needs no administrative right (ACL DRYRUN does). A user
// allowed a narrower pattern than prefix* is refused, although locks of
// some names would work: narrow WithKeyPrefix instead.
func (s *Session) checkRights(ctx context.Context) error {
	probe := s.prefix + "\x00probe:" + crand.Text()
	keys := []string{probe + ":k", probe + ":q"}
	for _, run := range []struct {
		cmd string
		do  func() *redis.Cmd
	}{
		{"EVAL", func() *redis.Cmd { return probeScript.Eval(ctx, s.cli, keys, probe) }},
		{"EVALSHA", func() *redis.Cmd { return probeScript.EvalSha(ctx, s.cli, keys, probe) }},
	} {
		res, err := run.do().Slice()
		if err != nil {
			if perr := s.permissionError(err, run.cmd); perr != nil {
				return perr
			}
			return &recipe.OpError{Op: "connect", Err: fmt.Errorf("checking the ACL rights: %w", err)}
		}
		if len(res) == 2 {
			cmd, _ := res[0].(string)
			msg, _ := res[1].(string)
			return &PermissionError{Right: s.rightOf(msg, cmd), Err: errors.New(msg)}
		}
	}
	return s.checkSubscribe(ctx, probe)
}

// checkSubscribe subscribes to and unsubscribes from channel on a pub/sub
// connection of its own, and returns a *PermissionError if either is
// refused.
func (s *Session) checkSubscribe(ctx context.Context, channel string) error {
	ps := s.cli.Subscribe(ctx)
	defer ps.Close()
	for _, step := range []struct {
		cmd  string
		send func(context.Context, ...string) error
	}{{"SUBSCRIBE", ps.Subscribe}, {"UNSUBSCRIBE", ps.Unsubscribe}} {
		err := step.send(ctx, channel)
		if err == nil {
			_, err = ps.Receive(ctx) // the confirmation, or the refusal
		}
		if err != nil {
			if perr := s.permissionError(err, step.cmd); perr != nil {
				return perr
			}
			return &recipe.OpError{Op: "connect", Err: fmt.Errorf("checking the ACL rights (%s): %w", step.cmd, err)}
		}
	}
	return nil
}

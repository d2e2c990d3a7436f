package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// PermissionError is the error of a call refused by the server's access
// control (Redis ACL): at a fence's or register's first call, when its
// user lacks a right the fence needs on its own keys (Right names it:
// "command EVALSHA", "command SET", "keys"), or at Do when a write's
// command or key is refused (Right names the write). Nothing was applied.
// It matches recipe.ErrNoPermission; Err is the server's answer. The
// package documentation gives the ACL line that grants every right.
type PermissionError struct {
	Right string
	Err   error
}

// Error names the missing right and quotes the server's refusal (which may
// name the user, never the password).
func (e *PermissionError) Error() string {
	return "fenceredis: the Redis user lacks a right: " + e.Right +
		" (see the package documentation for the ACL line), nothing applied: " + e.Err.Error()
}

// Unwrap returns recipe.ErrNoPermission and the server's answer.
func (e *PermissionError) Unwrap() []error { return []error{recipe.ErrNoPermission, e.Err} }

// permissionError returns a *PermissionError for msg, an error reply, if
// it is an ACL refusal: "NOPERM ..." for a command the client sent (the
// script's own ones name the write), "ERR The user executing the script
// can't ..." for one a script reached. Otherwise nil.
func permissionError(msg string, err error) error {
	right, ok := "", false
	switch {
	case strings.HasPrefix(msg, "NOPERM fenceredis: "):
		right, ok = strings.TrimPrefix(msg, "NOPERM fenceredis: "), true
	case strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, "key"):
		right, ok = "keys", true
	case strings.HasPrefix(msg, "NOPERM"):
		right, ok = "command", true
		if _, rest, found := strings.Cut(msg, "to run the '"); found {
			cmd, _, _ := strings.Cut(rest, "'")
			right += " " + strings.ToUpper(cmd)
		}
	case strings.Contains(msg, "user executing the script can't"):
		right, ok = "a command of the script", true
	}
	if !ok {
		return nil
	}
	return &PermissionError{Right: right, Err: err}
}

// readError is the error of a plain read of key (GET, HMGET) that Redis
// refused: a *PermissionError for an ACL refusal (a right revoked after the
// first call's check), else err wrapped with the key.
func readError(key string, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		if perr := permissionError(re.Error(), err); perr != nil {
			return perr
		}
	}
	return fmt.Errorf("fenceredis: reading %q: %w", key, err)
}

// rightsScript checks with redis.acl_check_cmd (Redis 7) that the user may
// run each command of ARGV on KEYS[1], as the package's scripts run it; it
// writes nothing, and answers {} or {the first command refused}. Running
// it by EVAL and by EVALSHA checks those two, and the key's pattern. On
// Redis 6, which has no acl_check_cmd, only these are checked.
var rightsScript = redis.NewScript(`
if not redis.acl_check_cmd then return {} end
local args = {SET = {'1'}, HMGET = {'token'}, HSET = {'token', '1'}}
for _, c in ipairs(ARGV) do
	if not redis.acl_check_cmd(c, KEYS[1], unpack(args[c] or {})) then return {c} end
end
return {}
`)

// rights checks, once (until a check succeeds), that the client's user
// may run the commands a fence or register runs on its keys.
type rights struct {
	cmds []string // the commands run on its keys
	done atomic.Bool
}

// check runs rightsScript by EVAL and EVALSHA on key, the fence's or the
// register's own key of this call (so an ACL that names exactly the keys
// used passes), unless a check succeeded already. Errors: a
// *PermissionError; a failure of the check itself.
func (r *rights) check(ctx context.Context, cli *redis.Client, key string) error {
	if r.done.Load() {
		return nil
	}
	args := make([]any, len(r.cmds))
	for i, c := range r.cmds {
		args[i] = c
	}
	for _, run := range []func() *redis.Cmd{
		func() *redis.Cmd { return rightsScript.Eval(ctx, cli, []string{key}, args...) },
		func() *redis.Cmd { return rightsScript.EvalSha(ctx, cli, []string{key}, args...) },
	} {
		res, err := run().Slice()
		var re redis.Error
		if errors.As(err, &re) {
			if perr := permissionError(re.Error(), err); perr != nil {
				return perr
			}
		}
		if err != nil {
			return fmt.Errorf("fenceredis: checking the ACL rights, nothing applied: %w", err)
		}
		if len(res) == 1 {
			cmd, _ := res[0].(string)
			return &PermissionError{Right: "command " + cmd, Err: fmt.Errorf("redis.acl_check_cmd refuses %s on %q", cmd, key)}
		}
	}
	r.done.Store(true)
	return nil
}

package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
)

// aclRules are the rules of the package documentation's ACL line (after
// the user name and password) for key prefix p: every right the locks
// need, and no other.
func aclRules(p string) string {
	return "resetkeys ~" + p + "* resetchannels &" + p + "* -@all +ping +role +eval +evalsha +subscribe +unsubscribe " +
		"+get +set +incr +pexpire +pttl +del +publish +zadd +zrem +zscore +zrange +zpopmin"
}

// aclPassword is the test users' password: it must appear in no error.
const aclPassword = "s3cr3t-zkr-acl-pw"

// aclUser creates the user name on srv with aclRules(prefix) changed by
// edit (Redis applies rules left to right: a later one overrides), deleted
// at the test's end, and returns the URL that logs in as it.
func aclUser(t *testing.T, srv *redistest.Server, name, edit string) string {
	t.Helper()
	ctx := context.Background()
	rdb := srv.Client(t)
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + aclPassword}
	for _, r := range strings.Fields(aclRules(srv.KeyPrefix()) + " " + edit) {
		args = append(args, r)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", name) })
	return "redis://" + url.UserPassword(name, aclPassword).String() + "@" + srv.Addr() + "/0"
}

// The package documentation gives the exact ACL line the tests use.
func TestDocumentedACLLine(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	line := "ACL SETUSER locker on >PASSWORD " + aclRules(redislock.DefaultKeyPrefix)
	if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " "), line) {
		t.Errorf("doc.go does not give the ACL line\n%s", line)
	}
}

// Connect refuses a user that lacks any right the locks need, with a
// *PermissionError (recipe.ErrNoPermission) that names the right; Redis
// 7's default for a new user, no channel at all (acl-pubsub-default
// resetchannels), among them. Before, Connect accepted every one of them
// and the locks failed later: waiters were woken only at their fallback
// re-check, the release script failed after its DEL.
func TestConnectChecksRights(t *testing.T) {
	srv := redistest.Start(t)
	p := srv.KeyPrefix()
	for _, c := range []struct{ user, edit, right string }{
		{"no-channels", "resetchannels", "channels " + p + "*"},
		{"other-channels", "resetchannels &elsewhere:*", "channels " + p + "*"},
		{"other-keys", "resetkeys ~elsewhere:*", "keys " + p + "*"},
		{"read-only-keys", "resetkeys %R~" + p + "*", "keys " + p + "*"},
		{"no-eval", "-eval", "command EVAL"},
		{"no-evalsha", "-evalsha", "command EVALSHA"},
		{"no-zpopmin", "-zpopmin", "command ZPOPMIN"},
		{"no-publish", "-publish", "command PUBLISH"},
		{"no-subscribe", "-subscribe", "command SUBSCRIBE"},
		{"no-unsubscribe", "-unsubscribe", "command UNSUBSCRIBE"},
	} {
		t.Run(c.user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := redislock.Connect(ctx, aclUser(t, srv, c.user, c.edit), redislock.WithKeyPrefix(p))
			if err == nil {
				s.Close()
				t.Fatalf("Connect accepted a user without %s", c.right)
			}
			var perr *redislock.PermissionError
			if !errors.Is(err, recipe.ErrNoPermission) || !errors.As(err, &perr) {
				t.Fatalf("Connect = %v, want a *PermissionError matching recipe.ErrNoPermission", err)
			}
			if !strings.HasPrefix(perr.Right, c.right) {
				t.Errorf("the error names %q, want %q: %v", perr.Right, c.right, err)
			}
			if strings.Contains(err.Error(), aclPassword) {
				t.Errorf("the error shows the password (not printed)")
			}
		})
	}
	if n, err := srv.Client(t).DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("keys left by the checks: %d, %v", n, err)
	}
}

// A user with exactly the documented rights connects, and its waiters are
// woken by the release (within a second, where the fallback re-check
// would come after the TTL, 30 s).
func TestDocumentedRightsSuffice(t *testing.T) {
	srv := redistest.Start(t)
	u := aclUser(t, srv, "locker", "")
	const ttl = 30 * time.Second
	rec := &metricstest.Events{}
	a := mustNew(t, connectURL(t, u, srv, redislock.WithTTL(ttl)), "acl")
	b := mustNew(t, connectURL(t, u, srv, redislock.WithTTL(ttl), redislock.WithMetrics(rec)), "acl")
	la := acquire(t, a)
	got := make(chan recipe.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
		defer cancel()
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	rec.WaitFor(t, 10*time.Second, "waiting lock acl +1") // B is queued
	released := time.Now()
	release(t, la)
	select {
	case lb := <-got:
		t.Logf("B was granted %v after A's release", time.Since(released).Round(time.Millisecond))
		if lb != nil {
			release(t, lb)
		}
	case <-time.After(time.Second):
		t.Fatalf("B was not granted within 1 s of A's release")
	}
}

// Rights revoked while locks are in use are not failed silently: a
// release whose waiters can't be told any more (channel rights revoked)
// frees the lock all the same, returns an error matching
// recipe.ErrNoPermission and logs at ERROR; an Acquire whose script is
// refused, or whose subscription is refused, returns such an error at once
// instead of retrying or waiting. Before, the release script failed after
// its DEL and Release reported success.
func TestRevokedRights(t *testing.T) {
	srv := redistest.Start(t)
	u := aclUser(t, srv, "revoked", "")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	const ttl = 30 * time.Second
	a := mustNew(t, connectURL(t, u, srv, redislock.WithTTL(ttl), redislock.WithLogger(log)), "revoked")
	rec := &metricstest.Events{}
	sb := connectURL(t, u, srv, redislock.WithTTL(ttl), redislock.WithLogger(log), redislock.WithMetrics(rec))
	b := mustNew(t, sb, "revoked")
	la := acquire(t, a)
	waiter := make(chan error, 1)
	bctx, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	go func() {
		l, err := b.Acquire(bctx)
		if err == nil {
			_ = l.Release(context.Background())
		}
		waiter <- err
	}()
	rdb := srv.Client(t)
	rec.WaitFor(t, 10*time.Second, "waiting lock revoked +1") // B is queued
	ctx := context.Background()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "revoked", "resetchannels").Err(); err != nil {
		t.Fatal(err)
	}
	cctx, cancelC := context.WithTimeout(ctx, ttl)
	defer cancelC()
	start := time.Now()
	if _, err := mustNew(t, sb, "revoked").Acquire(cctx); !errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("a new waiter's Acquire after the channel rights were revoked = %v, want ErrNoPermission", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the new waiter took %v to give up on the refused subscription", d)
	}
	err := la.Release(ctx)
	if !errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("Release after the channel rights were revoked = %v, want ErrNoPermission", err)
	}
	// Freed: the key is gone, or B (woken by a re-check) holds it now.
	if v, err := rdb.Get(ctx, a.Key()).Result(); err != redis.Nil && (err != nil || v == redislock.Owner(la)) {
		t.Errorf("the lock key after that Release: %q, %v; want A's deleted", v, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("no ERROR line logged:\n%s", logs.String())
	}
	cancelB()
	<-waiter

	if err := rdb.Do(ctx, "ACL", "SETUSER", "revoked", "-evalsha").Err(); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	start = time.Now()
	if _, err := a.Acquire(actx); !errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("Acquire after EVALSHA was revoked = %v, want ErrNoPermission", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Acquire took %v to give up on a refusal", d)
	}
	if strings.Contains(logs.String(), aclPassword) {
		t.Errorf("the logs show the password")
	}
}

// connectURL opens a session on rawURL with srv's key prefix, closed at
// tb's cleanup.
func connectURL(tb testing.TB, rawURL string, srv *redistest.Server, opts ...redislock.Option) *redislock.Session {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := redislock.Connect(ctx, rawURL, append([]redislock.Option{redislock.WithKeyPrefix(srv.KeyPrefix())}, opts...)...)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

package fenceredis_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
)

// aclRules are the rules of the package documentation's ACL line (after
// the user name and password) for the key prefix p: every right the fence
// needs with every kind of Write, and no other.
func aclRules(p string) string {
	return "resetkeys ~" + p + "* -@all +eval +evalsha +type +get +set +hmget +hset +del +hdel +rpush +sadd +srem"
}

// aclPassword is the test users' password: it must appear in no error.
const aclPassword = "s3cr3t-zkr-fence-acl"

// aclClient creates the user name with aclRules(e.prefix) changed by edit
// (a later rule overrides an earlier one), deleted at the test's end, and
// returns a client logged in as it.
func aclClient(t *testing.T, e *env, name, edit string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + aclPassword}
	for _, r := range strings.Fields(aclRules(e.prefix) + " " + edit) {
		args = append(args, r)
	}
	if err := e.cli.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
	t.Cleanup(func() { e.cli.Do(context.Background(), "ACL", "DELUSER", name) })
	c := redis.NewClient(&redis.Options{Addr: e.srv.Addr(), Username: name, Password: aclPassword, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// noSecret fails the test if err shows the password.
func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), aclPassword) {
		t.Errorf("the error shows the password: %v", err)
	}
}

// TestDocumentedACLLine: doc.go gives the ACL line verbatim, and a user
// with exactly its rights can use every call of the package.
func TestDocumentedACLLine(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	line := "ACL SETUSER fencer on >PASSWORD " + aclRules("myapp:")
	if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " "), line) {
		t.Errorf("doc.go does not give the ACL line\n%s", line)
	}
	e := newEnv(t)
	cli := aclClient(t, e, "fencer", "")
	ctx := context.Background()
	f, err := fenceredis.New(cli, e.prefix+"fence:")
	if err != nil {
		t.Fatal(err)
	}
	p := e.prefix
	ws := []fenceredis.Write{fenceredis.Set(p+"s", "v"), fenceredis.HSet(p+"h", "f", "v"), fenceredis.RPush(p+"l", "v"),
		fenceredis.SAdd(p+"set", "m")}
	if _, err := f.Do(ctx, "r", 5, ws...); err != nil {
		t.Fatalf("Do: %v", err)
	}
	ws = []fenceredis.Write{fenceredis.Del(p + "s"), fenceredis.HDel(p+"h", "f"), fenceredis.SRem(p+"set", "m")}
	if _, err := f.Do(ctx, "r", 6, ws...); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if h, err := f.Highest(ctx, "r"); h != 6 || err != nil {
		t.Fatalf("Highest = %v, %v", h, err)
	}
	if h, err := f.RaiseFloor(ctx, "r", 9); h != 9 || err != nil {
		t.Fatalf("RaiseFloor = %v, %v", h, err)
	}
	err = f.Admit(ctx, "r", 10, func(ctx context.Context) error { return fenceredis.AddWrites(ctx, fenceredis.Set(p+"s", "a")) })
	if err != nil || e.get(t, p+"s") != "a" {
		t.Fatalf("Admit: %v", err)
	}
	r, err := fenceredis.NewRegister(cli, p+"reg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 3, []byte("x")); err != nil {
		t.Fatalf("Register.Write: %v", err)
	}
	if v, err := r.Read(ctx); err != nil || string(v.Data) != "x" {
		t.Fatalf("Register.Read = %+v, %v", v, err)
	}
	if h, err := r.RaiseFloor(ctx, 4); h != 4 || err != nil {
		t.Fatalf("Register.RaiseFloor = %v, %v", h, err)
	}
}

// TestACLRefusesNoHalfBatch: a user allowed EVAL but not RPUSH (-@list,
// the usual least-privilege set-up) sends a batch whose second write is
// an RPUSH. Redis checks a script's commands against the ACL only when
// the script reaches them: before, the SET landed without the token, the
// error said "nothing applied", and a holder with an older token then
// wrote over it. Now the script checks every write's rights before it
// writes anything: nothing lands, the error is an ACL refusal
// (recipe.ErrNoPermission) naming the command, and no write is ever left
// without its token.
func TestACLRefusesNoHalfBatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f, err := fenceredis.New(aclClient(t, e, "nolist", "-@list"), e.prefix+"fence:")
	if err != nil {
		t.Fatal(err)
	}
	data, list := e.prefix+"data", e.prefix+"list"
	for i, call := range []func() error{
		func() error {
			_, err := f.Do(ctx, "r", 10, fenceredis.Set(data, "new"), fenceredis.RPush(list, "x"))
			return err
		},
		func() error {
			return f.Admit(ctx, "r", 10, func(ctx context.Context) error {
				return fenceredis.AddWrites(ctx, fenceredis.Set(data, "new"), fenceredis.RPush(list, "x"))
			})
		},
	} {
		err := call()
		noSecret(t, err)
		if !errors.Is(err, recipe.ErrNoPermission) || !strings.Contains(err.Error(), "RPUSH") {
			t.Errorf("call %d: %v, want an error matching recipe.ErrNoPermission naming RPUSH", i, err)
		}
		high, herr := f.Highest(ctx, "r")
		if got := e.get(t, data); got != "<absent>" || high != 0 || herr != nil {
			t.Fatalf("call %d: data %q with the highest token %v (%v): a write landed without its token", i, got, high, herr)
		}
	}
	// The paused holder of an older token writes: nothing of the newer
	// holder's is there to write over.
	if _, err := f.Do(ctx, "r", 5, fenceredis.Set(data, "old")); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, data); got != "old" {
		t.Fatalf("data %q", got)
	}
}

// TestACLCheckedAtFirstUse: a fence or register whose user lacks a right
// it needs on its own keys is refused at its first call with an error
// matching recipe.ErrNoPermission that names the right, before anything
// is written.
func TestACLCheckedAtFirstUse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		user, edit, right string
		fence, reg        bool // whether each needs the right
	}{
		{"no-eval", "-eval", "EVAL", true, true},
		{"no-evalsha", "-evalsha", "EVALSHA", true, true},
		{"no-type", "-type", "TYPE", true, true},
		{"no-get", "-get", "GET", true, false},
		{"no-set", "-set", "SET", true, false},
		{"no-hset", "-hset", "HSET", false, true},
		{"no-hmget", "-hmget", "HMGET", false, true},
		{"read-only-keys", "resetkeys %R~" + e.prefix + "*", "", true, true},
		{"other-keys", "resetkeys ~elsewhere:*", "", true, true},
	} {
		t.Run(c.user, func(t *testing.T) {
			cli := aclClient(t, e, c.user, c.edit)
			f, err := fenceredis.New(cli, e.prefix+"fence:")
			if err != nil {
				t.Fatal(err)
			}
			r, err := fenceredis.NewRegister(cli, e.prefix+"reg:"+c.user)
			if err != nil {
				t.Fatal(err)
			}
			_, ferr := f.Do(ctx, c.user, 5, fenceredis.Set(e.prefix+"data:"+c.user, "x"))
			_, rerr := r.Write(ctx, 5, []byte("x"))
			for _, g := range []struct {
				what   string
				err    error
				needed bool
			}{{"Fence.Do", ferr, c.fence}, {"Register.Write", rerr, c.reg}} {
				noSecret(t, g.err)
				if !g.needed {
					if g.err != nil {
						t.Errorf("%s: %v", g.what, g.err)
					}
					continue
				}
				if !errors.Is(g.err, recipe.ErrNoPermission) || !strings.Contains(g.err.Error(), c.right) {
					t.Errorf("%s: %v, want an error matching recipe.ErrNoPermission naming %q", g.what, g.err, c.right)
				}
			}
		})
	}
	// Only the calls that were not refused wrote.
	var want []string
	for _, k := range []string{"data:no-hmget", "data:no-hset", "fence:no-hmget", "fence:no-hset", "reg:no-get", "reg:no-set"} {
		want = append(want, e.prefix+k)
	}
	if ks := e.keys(t); strings.Join(ks, " ") != strings.Join(want, " ") {
		t.Errorf("keys written: %v", ks)
	}
}

// TestPartialIsUncertain: should a write fail after the script has
// started writing (Redis 6, which has no redis.acl_check_cmd, or a
// failure no check foresaw), the token is already stored, so nothing
// lands without it, and the error matches fence.ErrUncertain and names
// the writes that landed. The failure is planted with a write Do would
// refuse (an HSET of an odd list), sent around Do's checks.
func TestPartialIsUncertain(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	data := e.prefix + "data"
	_, err := fenceredis.DoUnchecked(ctx, f, "r", 10, fenceredis.Set(data, "new"), fenceredis.HSet(e.prefix+"h", "odd"))
	var pe *fenceredis.PartialError
	if !errors.Is(err, fence.ErrUncertain) || !errors.As(err, &pe) || pe.Applied != 1 || !strings.Contains(err.Error(), "write 1") {
		t.Fatalf("%v, want a *PartialError matching fence.ErrUncertain with 1 write applied", err)
	}
	if high, err := f.Highest(ctx, "r"); high != 10 || err != nil || e.get(t, data) != "new" {
		t.Fatalf("Highest = %v, %v; data %q", high, err, e.get(t, data))
	}
	if _, err := f.Do(ctx, "r", 5, fenceredis.Set(data, "old")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older token after a partial batch: %v", err)
	}
}

// TestACLExactKeys: an ACL that names exactly the keys a call uses (the
// fence key of its resource and the key it writes) passes the first
// call's rights check (it once checked a key of its own that no such ACL
// covers, and refused with "lacks a right: keys").
func TestACLExactKeys(t *testing.T) {
	e := newEnv(t)
	p := e.prefix
	cli := aclClient(t, e, "exact", "resetkeys ~"+p+"fence:r ~"+p+"s")
	f, err := fenceredis.New(cli, p+"fence:")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.Do(ctx, "r", 11, fenceredis.Set(p+"s", "x")); err != nil {
		t.Fatalf("Do with an ACL naming exactly its keys: %v", err)
	}
	if got := e.get(t, p+"s"); got != "x" {
		t.Fatalf("%ss = %q, want x", p, got)
	}
}

// TestACLRevokedAfterFirstCall: a right revoked after the first call's
// check makes Highest and Admit (which reads the highest token first)
// fail with a *PermissionError matching recipe.ErrNoPermission, as Do
// does, not with Redis's untyped NOPERM.
func TestACLRevokedAfterFirstCall(t *testing.T) {
	e := newEnv(t)
	cli := aclClient(t, e, "revoked", "")
	f, err := fenceredis.New(cli, e.prefix+"fence:")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.Do(ctx, "r", 5, fenceredis.Set(e.prefix+"s", "v")); err != nil {
		t.Fatal(err)
	}
	if err := e.cli.Do(ctx, "ACL", "SETUSER", "revoked", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = f.Highest(ctx, "r")
	noSecret(t, err)
	var perr *fenceredis.PermissionError
	if !errors.As(err, &perr) || !errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("Highest after GET was revoked: %v, want a *PermissionError", err)
	}
	err = f.Admit(ctx, "r", 6, func(context.Context) error { return nil })
	if !errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("Admit after GET was revoked: %v, want recipe.ErrNoPermission", err)
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// The test password: `make test` fails if its output holds "s3cr3t-zkr-"
// anywhere (Makefile), so a password that leaks into an error or a log line
// shows up there even when the test that leaked it printed nothing. The
// servers go in ZK_SERVERS, not in the arguments, which a failing test
// prints.
const cliPW = "s3cr3t-zkr-cli"

// noSecretOut fails the test if p's output holds the test password or a
// part of it, naming the case without printing the output.
func noSecretOut(t *testing.T, name string, p *proc) {
	t.Helper()
	out := p.stderr.String() + p.stdout.String()
	for _, s := range []string{"s3cr3t-zkr", "zkr-cli"} {
		if strings.Contains(out, s) {
			t.Errorf("%s: the output shows the password (%q found; output not printed)", name, s)
			return
		}
	}
}

// TestLockHidesEveryPassword: `zkrecipes lock` shows no password of its
// servers in any output, for each way a backend takes one: PostgreSQL's
// URL query and keyword/value string (quoted, with a space and an escaped
// quote) and PGPASSWORD, refused by a real server that asks for the
// password (exit 70) or refused as a bad URL (64); etcd's query; a
// ZooKeeper list with user information; an ACL user's wrong password on a
// real Redis server.
func TestLockHidesEveryPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pg := pgtest.Shared(t)
	dsn := pg.Database(t)
	u, err := url.Parse(pg.PasswordRole(t, dsn, cliPW+"-role"))
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable", u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.User.Username())
	rs := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rs.Client(t).Do(ctx, "ACL", "SETUSER", "zkrsecrets", "on", ">"+cliPW+"-user", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	wrong := cliPW + " wrong'"
	for _, c := range []struct {
		name, servers, pgpassword string
		want                      int
	}{
		{"PostgreSQL URL query", u.String() + "&" + url.Values{"password": {wrong}}.Encode(), "", exitSoftware},
		{"PostgreSQL keyword/value", kv + ` password = '` + strings.ReplaceAll(wrong, "'", `\'`) + `'`, "", exitSoftware},
		{"PGPASSWORD", u.String(), wrong, exitSoftware},
		{"PostgreSQL bad URL", "postgres://u@127.0.0.1:1/db?password=" + cliPW + "&sslmode=bogus", "", exitUsage},
		{"PostgreSQL bad keyword/value", "host=127.0.0.1 password='x " + cliPW + "' sslmode=bogus", "", exitUsage},
		{"etcd query", "etcd://127.0.0.1:1/app?token=" + cliPW, "", exitUsage},
		{"Redis ACL user", "redis://zkrsecrets:" + url.PathEscape(wrong) + "@" + rs.Addr() + "/0", "", exitSoftware},
		{"ZooKeeper list with user information", "zkr:" + cliPW + "@127.0.0.1:1", "", -1},
	} {
		// PGPASSWORD in the command's environment only (set, empty or
		// not, over the test's own), so that the test can run in parallel.
		env := []string{"ZK_SERVERS=" + c.servers, "PGPASSWORD=" + c.pgpassword}
		p := startEnv(t, env, dir, false, "lock", "--connect-timeout", "3s", "--wait", "0", "/cli-test/secrets", "--", "true")
		code := p.wait(30 * time.Second)
		if code == 0 || (c.want >= 0 && code != c.want) {
			t.Errorf("%s: exited %d, want %d", c.name, code, c.want)
		}
		noSecretOut(t, c.name, p)
	}
}

// TestScrubbing: every log attribute is scrubbed of the secrets, whatever
// its kind (message, string, error, other values); the rest is untouched.
func TestScrubbing(t *testing.T) {
	var b syncBuffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: scrubbing([]string{cliPW}, durationText)}))
	log.Error("msg "+cliPW, "s", "a"+cliPW, "err", fmt.Errorf("e %s", cliPW), "hosts", []string{cliPW}, "n", 3, "d", time.Second)
	out := b.String()
	if strings.Contains(out, "zkr-cli") || !strings.Contains(out, `"n":3`) || !strings.Contains(out, `"d":"1s"`) {
		t.Errorf("scrubbed log line: %s", strings.ReplaceAll(out, cliPW, "PW"))
	}
}

// The digest credentials' password (--auth-file, ZK_AUTH) is one of the
// secrets every log line is scrubbed of.
func TestSecretsIncludeDigest(t *testing.T) {
	c := &common{servers: "127.0.0.1:2181"}
	c.sec.digest = []byte("alice:" + cliPW)
	if s := c.secrets(); !slices.Contains(s, cliPW) {
		t.Errorf("secrets() lacks the digest password (%d secrets)", len(s))
	}
}

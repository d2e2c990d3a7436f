package pglock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestBadURL: an unparsable URL is ErrBadURL, before any connection.
func TestBadURL(t *testing.T) {
	for _, url := range []string{"postgres://h:notaport/db", "postgres://%zz", "host=h port=x"} {
		if _, err := Connect(context.Background(), url); !errors.Is(err, ErrBadURL) {
			t.Errorf("Connect(%q) = %v, want an error matching ErrBadURL", url, err)
		}
	}
}

// TestUnreachableServer: a server that refuses connections gives the
// connection error at once, not after a long wait.
func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	start := time.Now()
	_, err = Connect(context.Background(), "postgres://nobody@127.0.0.1:"+strconv.Itoa(port)+"/db?sslmode=disable")
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || !errors.Is(err, recipe.ErrUnreachable) {
		t.Fatalf("Connect to a closed port = %v, want a *pgconn.ConnectError matching recipe.ErrUnreachable", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// A server that never answers: bounded by ctx (or the connect timeout).
	p := serverkit.NewFaultProxy()
	defer p.Close()
	p.Blackhole()
	cfg, err := pgconn.ParseConfig("postgres://nobody@127.0.0.1:1/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = proxyDialer(p, "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := ConnectConfig(ctx, cfg); err == nil {
		t.Fatal("ConnectConfig to a silent server succeeded")
	} else if d := time.Since(start); d > opTimeout/2 {
		t.Errorf("ConnectConfig to a silent server returned after %v (ctx: 500ms): %v", d, err)
	}
}

// TestBadOptions: invalid options are recipe.ErrBadOption, before any
// connection.
func TestBadOptions(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://nobody@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]Option{
		"TTL 0":            WithTTL(0),
		"TTL too short":    WithTTL(MinTTL - time.Millisecond),
		"TTL too long":     WithTTL(MaxTTL + time.Second),
		"table uppercase":  WithTable("Tokens"),
		"table injection":  WithTable("t; DROP TABLE x"),
		"table three dots": WithTable("a.b.c"),
		"table empty":      WithTable(""),
	} {
		if _, err := ConnectConfig(context.Background(), cfg, opt); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: %v, want an error matching recipe.ErrBadOption", name, err)
		}
	}
}

// TestLockNames: names the backend can't store are refused by New; the
// longest allowed one works, and so do names other backends once refused.
func TestLockNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.session(t, serverkit.NewFaultProxy())
	for _, name := range []string{"", strings.Repeat("x", MaxNameLen+1), "bad\xffutf8", "nul\x00byte"} {
		if _, err := New(s, name); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want an error matching recipe.ErrInvalidPath", name, err)
		}
		if err := CheckName(name); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("CheckName(%q) = %v, want an error matching recipe.ErrInvalidPath (no session needed)", name, err)
		}
	}
	if err := CheckName("/jobs/nightly"); err != nil {
		t.Errorf("CheckName of a good name: %v", err)
	}
	for _, name := range []string{strings.Repeat("é", MaxNameLen/2), "a\nb", "/", "a//b", "a/"} {
		m, err := New(s, name)
		if err != nil {
			t.Fatal(err)
		}
		mustRelease(t, mustAcquire(t, m))
	}
}

// TestCancelledContext: an Acquire whose context is already done returns
// its cause and opens no connection.
func TestCancelledContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.NewClient(t, "cancelled").(*client)
	lockConns := func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		rows, err := query(context.Background(), h.adm, "SELECT count(*) FROM pg_stat_activity "+
			"WHERE application_name = 'zkrecipes-pglock' AND datname = current_database()")
		if err != nil {
			t.Fatal(err)
		}
		return string(rows[0][0])
	}
	for deadline := time.Now().Add(opTimeout); lockConns() != "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection of Connect's check is still open")
		}
	}
	cause := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	for _, f := range []func(context.Context) (recipe.Lease, error){c.Acquire, c.TryAcquire} {
		if _, err := f(ctx); !errors.Is(err, cause) {
			t.Errorf("with a cancelled context: %v, want its cause", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := lockConns(); n != "0" {
		t.Errorf("%s lock connections opened by calls with a cancelled context, want 0", n)
	}
}

// TestTokenTable: the table is created on first use under its configured
// name; when it can't be, Connect says so and how to create it.
func TestTokenTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.session(t, serverkit.NewFaultProxy(), WithTable("public.custom_tokens"))
	m, err := New(s, "custom")
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, mustAcquire(t, m))
	h.mu.Lock()
	rows, err := query(context.Background(), h.adm, "SELECT n FROM public.custom_tokens WHERE key = $1::bigint", strconv.FormatInt(Key("custom"), 10))
	h.mu.Unlock()
	if err != nil || len(rows) != 1 || string(rows[0][0]) != "1" {
		t.Fatalf("custom_tokens row for the lock: %q, %v; want n = 1", rows, err)
	}

	for name, dsn := range map[string]string{
		"missing schema": h.dsn,
		"read-only role": h.dsn + "&default_transaction_read_only=on",
	} {
		table, want := DefaultTable, "public."+DefaultTable // created schema-qualified
		if name == "missing schema" {
			table, want = "nosuchschema.tokens", "nosuchschema.tokens"
		}
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ConnectConfig(context.Background(), cfg, WithTable(table))
		if !errors.Is(err, ErrTokenTable) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS "+want) {
			t.Errorf("%s: %v, want ErrTokenTable with the statement to run", name, err)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestKeyCollision: two names with one key share the lock and its token
// counter (safe), and the second one's Acquire logs a warning.
func TestKeyCollision(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var logs syncBuffer
	s := h.session(t, serverkit.NewFaultProxy(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	one, err := New(s, "one")
	if err != nil {
		t.Fatal(err)
	}
	two := &Mutex{s: s, name: "two", key: one.key} // a collision, forced
	l1 := mustAcquire(t, one)
	if l, err := two.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		if l != nil {
			l.Release(context.Background())
		}
		t.Fatalf("TryAcquire of a colliding name while the other is held: %v, want recipe.ErrLocked", err)
	}
	mustRelease(t, l1)
	l2 := mustAcquire(t, two)
	if l2.Token() <= l1.Token() {
		t.Errorf("colliding names: token %v after %v", l2.Token(), l1.Token())
	}
	mustRelease(t, l2)
	if out := logs.String(); !strings.Contains(out, "share one advisory key") || !strings.Contains(out, "other=one") {
		t.Errorf("no collision warning logged:\n%s", out)
	}
}

// TestPoolerGuard: the lock statements lock nothing when the backend that
// runs them is not the one the connection announced (what a pooler does).
func TestPoolerGuard(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgconn.Connect(ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp(conn)
	key := Key("pooled")
	other := strconv.FormatUint(uint64(conn.PID())+1, 10)
	for _, sql := range []string{trySQL, waitSQL} {
		rows, err := query(ctx, conn, sql, strconv.FormatInt(key, 10), other)
		if err != nil || len(rows) != 0 {
			t.Fatalf("%s with another pid: rows %q, %v; want none", sql, rows, err)
		}
		if n, err := countLocks(ctx, conn, key); err != nil || n != 0 {
			t.Fatalf("%s with another pid locked: %d entries (%v)", sql, n, err)
		}
	}
	rows, err := query(ctx, conn, trySQL, strconv.FormatInt(key, 10), strconv.FormatUint(uint64(conn.PID()), 10))
	if err != nil || len(rows) != 1 || string(rows[0][0]) != "true" {
		t.Fatalf("%s with our pid: %q, %v; want true", trySQL, rows, err)
	}
}

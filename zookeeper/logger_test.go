package zookeeper

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// records is a slog handler that keeps every record it gets.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// find returns the records with message msg and attribute key=value ("" for
// any value).
func (r *records) find(msg, key, value string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if rec.Message != msg {
			continue
		}
		ok := key == ""
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key && (value == "" || a.Value.String() == value) {
				ok = true
			}
			return !ok
		})
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

func (r *records) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.recs...)
}

// TestDefaultLoggerWarnsThroughSlogDefault (issue 14): a Session given no
// logger is not silent when something fails: its warnings (here, the
// connection SUSPENDED) reach slog.Default(), and only they: the routine
// INFO lines (connected, reconnected, closed) do not.
func TestDefaultLoggerWarnsThroughSlogDefault(t *testing.T) {
	// Not parallel: it replaces slog.Default.
	rec := &records{}
	old := slog.Default()
	slog.SetDefault(slog.New(rec))
	defer slog.SetDefault(old)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, zktest.Shared(t).Servers(), WithDialer(p.Dial), WithSessionTimeout(4*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Listen(ctx)
	p.Cut()
	if c := next(t, ch, 10*time.Second); c.State != recipe.StateSuspended {
		t.Fatalf("got %+v, want SUSPENDED", c)
	}
	p.Resume()
	if c := next(t, ch, 10*time.Second); c.State != recipe.StateReconnected {
		t.Fatalf("got %+v, want RECONNECTED", c)
	}
	s.Close()
	serverkit.Eventually(t, 10*time.Second, "the SUSPENDED warning", func() bool {
		return len(rec.find("connection state", "state", "SUSPENDED")) >= 1
	})
	for _, r := range rec.all() {
		if r.Level < slog.LevelWarn {
			t.Errorf("a %v record reached slog.Default(): %q", r.Level, r.Message)
		}
	}
}

// TestRoutineLines (issue 14): a Session that connects and closes logs
// each once, as what it is: "session connected" and "session closed" with
// the session's id, no CONNECTED transition beside the first, and no LOST
// for a normal Close.
func TestRoutineLines(t *testing.T) {
	t.Parallel()
	rec := &records{}
	s := connect(t, zktest.Shared(t).Servers(), WithLogger(slog.New(rec)))
	id := fmt.Sprintf("0x%x", s.ID())
	s.Close()
	var msgs []string
	for _, r := range rec.all() {
		if r.Level >= slog.LevelInfo {
			msgs = append(msgs, r.Message)
		}
	}
	if !slices.Equal(msgs, []string{"session connected", "session closed"}) {
		t.Fatalf("INFO and above: %q, want session connected, session closed", msgs)
	}
	if len(rec.find("session closed", "session", id)) != 1 {
		t.Fatal("the close does not name the session")
	}
}

// TestReleaseWithDoneContext: Release with a context already done (a
// deferred Release of a request's context at shutdown) still deletes the
// node within the abandon budget and reports success, with no warning;
// nothing is handed to the cleaner.
func TestReleaseWithDoneContext(t *testing.T) {
	// Not parallel: each delete has 250 ms (abandonBudget) to round-trip.
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var recs records
	s := connect(t, cl.Servers(), WithLogger(slog.New(&recs)))
	q := newTestQueue(t, s, "/reldone")
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := q.Acquire(ctx, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release with a done context: %v", err)
		}
		if st := in.Stat(l.(*lease).Path()); st != nil {
			t.Fatalf("node left after Release: %+v", st)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("second Release: %v", err)
		}
	}
	if n := s.cleaner.pending(); n != 0 {
		t.Fatalf("%d deletes handed to the cleaner", n)
	}
	for _, rec := range recs.all() {
		if rec.Level >= slog.LevelWarn {
			t.Errorf("logged %v %q", rec.Level, rec.Message)
		}
	}
}

// TestLostLeaseLoggedOnce: a lease lost (its node deleted by someone else)
// is logged once, at WARN, with its cause, after the Session's lock is
// released; a released one is not logged.
func TestLostLeaseLoggedOnce(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var recs records
	s := connect(t, cl.Servers(), WithLogger(slog.New(&recs)))
	q := newTestQueue(t, s, "/lostlog")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := q.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	in.Delete(l.(*lease).Path())
	<-l.Context().Done()
	serverkit.Eventually(t, 10*time.Second, "the lost lease logged", func() bool {
		return len(recs.find("zookeeper: lease lost", "lock", "/lostlog")) > 0
	})
	r2, err := q.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got := recs.find("zookeeper: lease lost", "", "")
	if len(got) != 1 || got[0].Level != slog.LevelWarn {
		t.Fatalf("%d lease-lost records (want 1 at WARN): %v", len(got), got)
	}
	found := false
	got[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "cause" {
			found = strings.Contains(a.Value.String(), recipe.ErrNodeDeleted.Error())
		}
		return true
	})
	if !found {
		t.Fatalf("the record does not give the cause: %v", got[0])
	}
}

// TestShortSessionTimeoutWarns (issue 37 item 10): a session timeout
// under a second, or one the server negotiates to another value, is
// logged once at Connect as a WARN with both values and the two numbers
// they make; a timeout the server grants as asked, a second or more, logs
// no WARN. The shared cluster's tickTime is 100 ms: it negotiates into
// [200 ms, 60 s].
func TestShortSessionTimeoutWarns(t *testing.T) {
	t.Parallel()
	servers := zktest.Shared(t).Servers()
	warned := func(rec *records) []slog.Record {
		var out []slog.Record
		for _, r := range rec.all() {
			if r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "zookeeper: session timeout ") {
				out = append(out, r)
			}
		}
		return out
	}
	for _, c := range []struct {
		requested, negotiated time.Duration
		policy                SuspendPolicy
		why                   string // in the message; "" for no WARN
	}{
		{500 * time.Millisecond, 500 * time.Millisecond, SuspendPolicy{}, "under a second"},
		{100 * time.Millisecond, 200 * time.Millisecond, TolerateSuspension(0.5), "under a second"},
		{90 * time.Second, 60 * time.Second, SuspendPolicy{}, "negotiated by the server"},
		{2 * time.Second, 2 * time.Second, SuspendPolicy{}, ""},
	} {
		rec := &records{}
		s := connect(t, servers, WithSessionTimeout(c.requested), WithSuspendPolicy(c.policy), WithLogger(slog.New(rec)))
		got := s.SessionTimeout()
		s.Close()
		if got != c.negotiated {
			t.Fatalf("requested %v: negotiated %v, want %v (the cluster's tickTime changed?)", c.requested, got, c.negotiated)
		}
		w := warned(rec)
		if c.why == "" {
			if len(w) != 0 {
				t.Errorf("requested %v, negotiated as asked: %d WARN records: %v", c.requested, len(w), w)
			}
			continue
		}
		if len(w) != 1 || !strings.Contains(w[0].Message, c.why) {
			t.Errorf("requested %v (negotiated %v): WARN records %v, want one saying %q", c.requested, got, w, c.why)
			continue
		}
		want := map[string]time.Duration{
			"requested": c.requested, "negotiated": c.negotiated,
			"lease_ends_within": c.policy.revokeAfter(c.negotiated), "server_expires_after": c.negotiated,
		}
		w[0].Attrs(func(a slog.Attr) bool {
			if d, ok := want[a.Key]; ok {
				if a.Value.Duration() != d {
					t.Errorf("requested %v: %s = %v, want %v", c.requested, a.Key, a.Value, d)
				}
				delete(want, a.Key)
			}
			return true
		})
		if len(want) != 0 {
			t.Errorf("requested %v: the WARN lacks %v", c.requested, want)
		}
	}
}

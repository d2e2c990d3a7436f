package recipe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawLock grants leases with the tokens of its list, one per call, and
// records their releases: the backend's side of InEra, by hand.
type rawLock struct {
	tokens   []fence.Token
	released []fence.Token
	failRel  error // Release's error
}

type rawLease struct {
	l     *rawLock
	token fence.Token
}

func (l *rawLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	tok := l.tokens[0]
	l.tokens = l.tokens[1:]
	return &rawLease{l, tok}, nil
}

func (l *rawLock) TryAcquire(ctx context.Context) (recipe.Lease, error) { return l.Acquire(ctx) }

func (l *rawLease) Token() fence.Token       { return l.token }
func (l *rawLease) Context() context.Context { return context.Background() }
func (l *rawLease) Release(context.Context) error {
	l.l.released = append(l.l.released, l.token)
	return l.l.failRel
}

// TestInEraTokens: the wrapper adds the era's floor to every
// grant's token, in order; a token that does not fit is refused, its grant
// released, with a permanent error matching fence.ErrTokenOverflow (and the
// release's error joined); an era past the last is refused before
// any grant.
func TestInEraTokens(t *testing.T) {
	ctx := context.Background()
	raw := &rawLock{tokens: []fence.Token{1, 2, 1 << 40, fence.MaxRawToken, fence.MaxRawToken + 1, 1 << 63}}
	l := recipe.InEra(raw, 3)
	var prev fence.Token
	for range 4 {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok := lease.Token()
		if fence.EraOf(tok) != 3 || tok <= prev || tok < fence.Era(3).Floor() {
			t.Fatalf("token %v after %v: not in era 3 or not growing", tok, prev)
		}
		prev = tok
		if lease.Release(ctx) != nil || lease.Context() == nil {
			t.Fatal("Release and Context are the backend's")
		}
	}
	raw.failRel = errors.New("release failed")
	for range 2 {
		lease, err := l.TryAcquire(ctx)
		if lease != nil || !errors.Is(err, fence.ErrTokenOverflow) || !recipe.Permanent(err) || !errors.Is(err, raw.failRel) {
			t.Fatalf("a token over the range: %v, %v; want ErrTokenOverflow, permanent, with the release's error", lease, err)
		}
	}
	if len(raw.released) != 6 || raw.released[5] != 1<<63 {
		t.Fatalf("released %v: the refused grants must be released", raw.released)
	}
	past := &rawLock{tokens: []fence.Token{1}}
	if _, err := recipe.InEra(past, fence.MaxEra+1).Acquire(ctx); !errors.Is(err, fence.ErrTokenOverflow) || len(past.tokens) != 1 {
		t.Fatalf("era past the last: %v (grants taken: %d)", err, 1-len(past.tokens))
	}
}

// eraHarness runs the conformance suite over memlock locks in era 5.
type eraHarness struct{ srv *memlock.Server }

type eraClient struct {
	recipe.Lock
	*memlock.Session
}

func (h eraHarness) NewClient(tb testing.TB, lock string) locktest.Client {
	s := h.srv.Connect()
	tb.Cleanup(func() { s.Close() })
	m, err := memlock.New(s, lock)
	if err != nil {
		tb.Fatal(err)
	}
	return eraClient{recipe.InEra(m, 5), s}
}

func (h eraHarness) Leftovers(_ context.Context, lock string) (int, error) {
	return h.srv.Entries(lock), nil
}

func (h eraHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: eraTTL / 2, Max: eraTTL + 3*time.Second}
}

// eraTTL is the memlock TTL of the era suite: long enough that a loaded
// machine (race detector, busy cores) does not starve keep-alives past TTL/2.
const eraTTL = 2 * time.Second

// TestInEraConformance: a wrapped lock still meets the Lock
// contract (testkit/locktest over memlock).
func TestInEraConformance(t *testing.T) {
	srv, err := memlock.NewServer(memlock.WithTTL(eraTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	locktest.Run(t, eraHarness{srv})
}

// TestInEraNilLock: InEra around a nil lock, or a typed nil one, refuses
// Acquire and TryAcquire with ErrBadOption instead of panicking.
func TestInEraNilLock(t *testing.T) {
	var typed *memlock.Mutex
	for name, l := range map[string]recipe.Lock{"nil": recipe.InEra(nil, 1), "typed nil": recipe.InEra(typed, 1)} {
		if _, err := l.Acquire(context.Background()); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: Acquire = %v, want recipe.ErrBadOption", name, err)
		}
		if _, err := l.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: TryAcquire = %v, want recipe.ErrBadOption", name, err)
		}
	}
}

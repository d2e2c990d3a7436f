package grouptest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

type suite struct {
	h Harness
	b Bounds
}

// expiryWait bounds a wait that includes an expiry or a healed client
// registering again: the timed assertions use the Bounds; this only turns a
// hang into a failure.
func (s *suite) expiryWait() time.Duration {
	return 2 * max(s.b.DeadVisible.Max, s.b.CutOffContext)
}

// stepCtx returns a context for one step that should complete promptly: it
// ends OpTimeout from now (or when t ends).
func stepCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	t.Cleanup(cancel)
	return ctx
}

// joined is the outcome of a Join.
type joined struct {
	m   recipe.Member
	err error
}

// tryJoin calls c.Join(ctx, id, data) and fails the test if it has not
// returned OpTimeout after ctx is done (a backend that ignores its context
// must fail the suite, not hang it). A member that arrives after the test
// gave up leaves.
func tryJoin(t *testing.T, ctx context.Context, c Client, who, id string, data []byte) (recipe.Member, error) {
	t.Helper()
	ch := make(chan joined, 1)
	go func() {
		m, err := c.Join(ctx, id, data)
		ch <- joined{checkNil(t, who, id, m, err), err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(OpTimeout):
		go func() { leaveQuietly((<-ch).m) }()
		t.Fatalf("%s: Join(%q) did not return within %v after its context was done (%v)", who, id, OpTimeout, context.Cause(ctx))
		return nil, nil
	}
}

// checkNil returns m, or nil if err is not nil: a failed Join must return
// a nil Member, not an interface holding a nil pointer (whose methods the
// caller would then call).
func checkNil(t *testing.T, who, id string, m recipe.Member, err error) recipe.Member {
	if err != nil && m != nil {
		t.Errorf("%s: Join(%.20q) returned an error (%v) and a non-nil Member (%T), want a nil Member", who, id, err, m)
		return nil
	}
	return m
}

// join joins id on c, failing the test if that does not succeed within
// OpTimeout.
func join(t *testing.T, c Client, who, id string, data []byte) recipe.Member {
	t.Helper()
	m, err := tryJoin(t, stepCtx(t), c, who, id, data)
	if err != nil {
		t.Fatalf("%s: Join(%q) of a free id: %v", who, id, err)
	}
	if m == nil {
		t.Fatalf("%s: Join(%q) returned a nil Member and no error", who, id)
	}
	if m.ID() != id {
		t.Errorf("%s: the member's ID() = %q, want %q", who, m.ID(), id)
	}
	return m
}

// leave makes m leave, failing the test on an error or a hang.
func leave(t *testing.T, ctx context.Context, m recipe.Member, who string) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- m.Leave(ctx) }()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: Leave: %v", who, err)
		}
	case <-time.After(OpTimeout):
		t.Fatalf("%s: Leave did not return within %v", who, OpTimeout)
	}
}

// leaveQuietly makes m leave ignoring the outcome (teardown paths).
func leaveQuietly(m recipe.Member) {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	_ = m.Leave(ctx)
}

// registered returns m's Registered context, waiting up to d, and fails the
// test if there is none or it is already done.
func registered(t *testing.T, m recipe.Member, who string, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rctx, err := m.Registered(ctx)
	if err != nil {
		t.Fatalf("%s: Registered: %v", who, err)
	}
	if rctx == nil {
		t.Fatalf("%s: Registered returned a nil context and no error", who)
	}
	if rctx.Err() != nil {
		t.Errorf("%s: Registered returned a context already done (cause %v)", who, context.Cause(rctx))
	}
	return rctx
}

// members returns c's Members, failing the test on an error; the view must
// be well formed.
func members(t *testing.T, c Client, who string) recipe.View {
	t.Helper()
	v, err := c.Members(stepCtx(t))
	if err != nil {
		t.Fatalf("%s: Members: %v", who, err)
	}
	if p := viewProblem(v); p != "" {
		t.Errorf("%s: Members: %s", who, p)
	}
	return v
}

// eventuallyMembers polls c's Members until ok holds, for up to d: a read
// by another client need not reflect a write at once (ZooKeeper followers
// lag).
func eventuallyMembers(t *testing.T, c Client, who string, d time.Duration, what string, ok func(recipe.View) bool) recipe.View {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := members(t, c, who)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Members is not %s within %v: %s", who, what, d, show(v))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// viewProblem describes what is wrong with v's form, or returns "".
func viewProblem(v recipe.View) string {
	for i := 1; i < len(v.Members); i++ {
		if a, b := v.Members[i-1].ID, v.Members[i].ID; a >= b {
			if a == b {
				return fmt.Sprintf("id %q appears twice: %s", a, show(v))
			}
			return fmt.Sprintf("not sorted by id: %s", show(v))
		}
	}
	return ""
}

// find returns the member id of v.
func find(v recipe.View, id string) (recipe.MemberInfo, bool) {
	for _, mi := range v.Members {
		if mi.ID == id {
			return mi, true
		}
	}
	return recipe.MemberInfo{}, false
}

func has(id string) func(recipe.View) bool {
	return func(v recipe.View) bool { _, ok := find(v, id); return ok }
}

func lacks(id string) func(recipe.View) bool {
	return func(v recipe.View) bool { _, ok := find(v, id); return !ok }
}

// sameMembers reports whether a and b hold the same members (id, data and
// Since).
func sameMembers(a, b []recipe.MemberInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !bytes.Equal(a[i].Data, b[i].Data) || a[i].Since != b[i].Since {
			return false
		}
	}
	return true
}

// show formats v for failure messages.
func show(v recipe.View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rev %d [", v.Rev)
	for i, mi := range v.Members {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%q@%d", mi.ID, mi.Data, mi.Since)
	}
	b.WriteString("]")
	return b.String()
}

// leftovers returns the entries stored for group now.
func (s *suite) leftovers(t *testing.T, group string) int {
	t.Helper()
	n, err := s.h.Leftovers(stepCtx(t), group)
	if err != nil {
		t.Fatalf("Leftovers(%q): %v", group, err)
	}
	return n
}

// expectLeftovers waits up to d until the backend stores exactly want
// entries for group.
func (s *suite) expectLeftovers(t *testing.T, group string, want int, d time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := s.leftovers(t, group)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries stored for the group after %v, want %d (%s)", n, d, want, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

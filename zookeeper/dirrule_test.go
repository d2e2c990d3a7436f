package zookeeper

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestRuleFromDirData: the Rule of a queue declared RuleFromDirData is
// asked of the directory's data once per data version, not per listing;
// a changed version is read again; f's error, panic or nil Rule fails
// the acquisition and leaves no node. A queue needs a rule or the option.
func TestRuleFromDirData(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := connect(t, cl.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := NewQueue(s, "/dr", []string{"n-"}, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("NewQueue without a rule: %v", err)
	}
	var asked atomic.Int32
	mode := "ok"
	f := func(data []byte) (Rule, error) {
		asked.Add(1)
		switch mode {
		case "panic":
			panic("boom")
		case "nil":
			return nil, nil
		case "err":
			return nil, errTestRule
		}
		return FirstHolds, nil
	}
	q, err := NewQueue(s, "/dr", []string{"n-"}, nil, RuleFromDirData(f))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l, err := q.Acquire(ctx, "n-", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times for 3 acquisitions on the same data, want 1", n)
	}
	for _, m := range []string{"err", "panic", "nil"} {
		mode = m
		if _, err := in.Conn().Set(cl.Chroot()+"/dr", []byte(m), -1); err != nil {
			t.Fatal(err)
		}
		_, err := q.Acquire(ctx, "n-", nil)
		if m == "err" && !errors.Is(err, errTestRule) || m != "err" && !errors.Is(err, recipe.ErrBadOption) {
			t.Fatalf("f answering %s: %v", m, err)
		}
		if n := in.Children("/dr"); len(n) != 0 {
			t.Fatalf("f answering %s: left %v", m, n)
		}
	}
}

var errTestRule = errors.New("test rule refused")

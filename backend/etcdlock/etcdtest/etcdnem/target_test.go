package etcdnem_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// kind returns t's fault kind named name.
func kind(t *testing.T, tg *etcdnem.Target, name string) nemesis.FaultKind {
	t.Helper()
	for _, k := range tg.Faults() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no fault kind %s", name)
	return nemesis.FaultKind{}
}

// The revocation takes the holder's lease and says so exactly: Below is
// one past the holder's token, the holder's context ends, the waiter is
// let in with a larger token, and nothing is left once both close.
func TestRevokeHolder(t *testing.T) {
	c := etcdtest.StartCluster(t)
	tg := etcdnem.NewTarget(c, 0)
	defer tg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const base = "/nemesis/test"
	if err := tg.Prepare(ctx, base); err != nil {
		t.Fatal(err)
	}
	var locks []recipe.Lock
	var clients []nemesis.Client
	for i := range 2 {
		p := serverkit.NewFaultProxy()
		defer p.Close()
		cl, err := tg.Connect(ctx, i, p)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
		l, err := cl.Lock(base + "/lock")
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	if got := tg.SessionTimeout(); got != etcdnem.DefaultTTL {
		t.Errorf("SessionTimeout %v, want %v", got, etcdnem.DefaultTTL)
	}
	held, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan recipe.Lease, 1)
	go func() {
		l, err := locks[1].Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	time.Sleep(300 * time.Millisecond) // the waiter queues

	f := &nemesis.Fault{Kind: etcdnem.FaultRevoke, Client: -1}
	kind(t, tg, etcdnem.FaultRevoke).Inject(ctx, f, 0, rand.New(rand.NewPCG(1, 2)))
	if f.Err != "" || !f.Revokes || !f.Certain || f.Below != held.Token()+1 {
		t.Fatalf("revoke: %+v, want certain with Below %d", f, held.Token()+1)
	}
	select {
	case <-held.Context().Done():
		if c := context.Cause(held.Context()); !errors.Is(c, recipe.ErrNodeDeleted) && !errors.Is(c, recipe.ErrSessionLost) {
			t.Errorf("holder's cause %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder's context did not end after the revoke")
	}
	l := <-next
	if l == nil {
		t.FailNow()
	}
	if l.Token() <= held.Token() {
		t.Errorf("next token %d not above the revoked %d", l.Token(), held.Token())
	}
	_ = l.Release(ctx)
	held.Release(ctx) //nolint:errcheck // its lease is gone
	for _, cl := range clients {
		_ = cl.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := tg.Leftovers(ctx)
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after the clients closed: %v, %v", left, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

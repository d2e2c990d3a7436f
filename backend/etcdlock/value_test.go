package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// valueOnHook opens a Session whose client runs hook (if set) around each
// transaction: hook gets the invoker and returns the call's error.
func valueOnHook(t *testing.T, e *env, name string, hook *func(invoke func() error) error) *etcdlock.Value {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: e.srv.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				call := func() error { return invoke(ctx, method, req, reply, cc, opts...) }
				if _, ok := req.(*pb.TxnRequest); ok && hook != nil && *hook != nil {
					h := *hook
					*hook = nil
					return h(call)
				}
				return call()
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s, err := etcdlock.NewSession(opCtx(t), cli, etcdlock.WithTTL(testTTL), etcdlock.WithPrefix(e.prefix), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	v, err := etcdlock.NewValue(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValueRefused: what NewValue and TrySet refuse before sending.
func TestValueRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	if _, err := etcdlock.NewValue(nil, "v"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewValue(nil): %v, want recipe.ErrBadOption", err)
	}
	for _, bad := range []string{"", "a/_lock_x", "a/_member_x", strings.Repeat("x", etcdlock.MaxNameLen+1)} {
		if _, err := etcdlock.NewValue(s, bad); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("NewValue(%.20q): %v, want recipe.ErrInvalidPath", bad, err)
		}
	}
	v, err := etcdlock.NewValue(s, "/cfg/x")
	if err != nil {
		t.Fatal(err)
	}
	if want := e.prefix + "/cfg/x/_value_"; v.Key() != want {
		t.Errorf("Key() = %q, want %q", v.Key(), want)
	}
	if _, err := v.TrySet(opCtx(t), -1, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("TrySet(-1): %v, want recipe.ErrBadOption", err)
	}
	if _, err := v.TrySet(opCtx(t), 0, make([]byte, etcdlock.MaxValueData+1)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("TrySet over MaxValueData: %v, want recipe.ErrTooLarge", err)
	}
}

// TestValueBesideLockAndGroup: a value, a lock and a group of one name
// keep out of each other's keys.
func TestValueBesideLockAndGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	v, err := etcdlock.NewValue(s, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.TrySet(opCtx(t), 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	l, err := mutex(t, s, "shared").TryAcquire(opCtx(t))
	if err != nil {
		t.Fatalf("TryAcquire of the lock named like the value: %v", err)
	}
	defer l.Release(context.Background())
	g, err := etcdlock.NewGroup(s, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if view, err := g.Members(opCtx(t)); err != nil || len(view.Members) != 0 {
		t.Errorf("Members of the group named like the value = %+v, %v; want none", view, err)
	}
	if x, err := v.Get(opCtx(t)); err != nil || string(x.Data) != "x" {
		t.Errorf("Get = %+v, %v; want the value unchanged", x, err)
	}
}

// TestValueLostAnswerSettled: a put whose answer is lost and which is
// overwritten before the settle's read is still found applied (the key's
// history), and one not sent while another writer moved the key
// conflicts.
func TestValueLostAnswerSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hook func(invoke func() error) error
	v := valueOnHook(t, e, "lost", &hook)
	x, err := v.TrySet(opCtx(t), 0, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	lost := status.Error(codes.Unavailable, "test: answer lost")
	hook = func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		if _, err := e.in.Put(opCtx(t), v.Key(), "other"); err != nil {
			t.Error(err)
		}
		return lost
	}
	y, err := v.TrySet(opCtx(t), x.Version, []byte("b"))
	if err != nil || string(y.Data) != "b" || y.Version <= x.Version {
		t.Fatalf("TrySet whose answer was lost, then overwritten = %+v, %v; want applied", y, err)
	}
	cur, err := v.Get(opCtx(t))
	if err != nil || string(cur.Data) != "other" || cur.Version <= y.Version {
		t.Fatalf("Get = %+v, %v; want the other writer's value after ours", cur, err)
	}
	hook = func(func() error) error {
		if _, err := e.in.Put(opCtx(t), v.Key(), "third"); err != nil {
			t.Error(err)
		}
		return lost
	}
	if z, err := v.TrySet(opCtx(t), cur.Version, []byte("c")); !errors.Is(err, recipe.ErrConflict) {
		t.Errorf("TrySet not sent while another writer wrote = %+v, %v; want recipe.ErrConflict", z, err)
	}
}

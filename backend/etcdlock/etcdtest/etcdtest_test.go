package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// TestURLPrefix: URL adds the "/" a prefix lacks, and nothing to an empty
// prefix or one that has it.
func TestURLPrefix(t *testing.T) {
	s := etcdtest.Shared(t)
	base := s.URL("")
	for prefix, want := range map[string]string{"": base, "p": base + "/p", "/p": base + "/p", "p/q": base + "/p/q"} {
		if got := s.URL(prefix); got != want {
			t.Errorf("URL(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// TestServerSupportsTheClient checks, against the server the tests use, every
// part of the etcd API that package etcdlock relies on, with the client
// version this module requires: a lease grant and single keep-alives (and
// the "not found" answer after a revoke), a transaction whose compare covers
// a key range and whose reads see its own put, sorted and bounded ranges,
// and a watch from a past revision that reports a delete.
func TestServerSupportsTheClient(t *testing.T) {
	s := etcdtest.Shared(t)
	p := etcdtest.Prefix(t, s)
	cli := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	st, err := cli.Status(ctx, s.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server version %s", st.Version)

	g, err := cli.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ka, err := cli.KeepAliveOnce(ctx, g.ID); err != nil || ka.TTL <= 0 {
		t.Fatalf("KeepAliveOnce: %v, %v", ka, err)
	}

	dir := p + "/lock/"
	put := func(key string) *clientv3.TxnResponse {
		t.Helper()
		r, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(g.ID)), clientv3.OpGet(dir, clientv3.WithFirstCreate()...)).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := put(dir + "a")
	if !r1.Succeeded {
		t.Fatal("the put of a new key did not succeed")
	}
	first := r1.Responses[1].GetResponseRange().Kvs
	if len(first) != 1 || string(first[0].Key) != dir+"a" || first[0].CreateRevision != r1.Header.Revision {
		t.Fatalf("a read after a put in one transaction: %v, want the put key at revision %d", first, r1.Header.Revision)
	}
	if again := put(dir + "a"); again.Succeeded || len(again.Responses[0].GetResponseRange().Kvs) != 1 {
		t.Fatalf("a repeated conditional put: %+v", again)
	}
	r2 := put(dir + "b")

	empty, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(p+"/none/"), "=", 0).WithPrefix()).Commit()
	if err != nil || !empty.Succeeded {
		t.Fatalf("a range compare on an empty range: %v, %v", empty, err)
	}
	full, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).Commit()
	if err != nil || full.Succeeded {
		t.Fatalf("a range compare on a range with keys: %v, %v", full, err)
	}
	lower, err := cli.Get(ctx, dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(r2.Header.Revision-1))...)
	if err != nil || len(lower.Kvs) != 1 || string(lower.Kvs[0].Key) != dir+"a" {
		t.Fatalf("the key below b: %v, %v", lower, err)
	}

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cli.Watch(wctx, dir+"a", clientv3.WithRev(r1.Header.Revision+1), clientv3.WithFilterPut())
	del, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(dir+"a"), "=", r1.Header.Revision)).
		Then(clientv3.OpDelete(dir + "a")).Commit()
	if err != nil || !del.Succeeded {
		t.Fatalf("a delete guarded by the create revision: %v, %v", del, err)
	}
	select {
	case wr := <-wch:
		if err := wr.Err(); err != nil || len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete {
			t.Fatalf("watch: %+v, %v", wr, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delete event")
	}
	wcancel()

	if _, err := cli.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.KeepAliveOnce(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("KeepAliveOnce after a revoke: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if n, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || n.Count != 0 {
		t.Fatalf("keys left after the revoke: %v, %v", n, err)
	}
	if _, err := cli.Put(ctx, dir+"c", "", clientv3.WithLease(g.ID)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("a put under a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}

// Without a binary, Launch fails with ErrNoServer and the install hint
// (never a skip).
func TestNoServer(t *testing.T) {
	t.Setenv(etcdtest.EnvEndpoints, "")
	t.Setenv(etcdtest.EnvBinary, "/nonexistent/etcd")
	_, err := etcdtest.Launch(context.Background())
	if !errors.Is(err, etcdtest.ErrNoServer) || !strings.Contains(err.Error(), etcdtest.InstallHint) {
		t.Fatalf("Launch without a binary: %v, want ErrNoServer with the install hint", err)
	}
}

// ETCD_TEST_ENDPOINTS names a server that is used as it is and can't be
// controlled.
func TestExternalServer(t *testing.T) {
	shared := etcdtest.Shared(t)
	t.Setenv(etcdtest.EnvEndpoints, strings.Join(shared.Endpoints(), ","))
	s, err := etcdtest.Launch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Endpoints(); strings.Join(got, ",") != strings.Join(shared.Endpoints(), ",") {
		t.Errorf("endpoints %v, want %v", got, shared.Endpoints())
	}
	if err := s.Kill(); !errors.Is(err, etcdtest.ErrUnsupported) {
		t.Errorf("Kill of an external server: %v, want ErrUnsupported", err)
	}
	if err := s.Restart(context.Background()); !errors.Is(err, etcdtest.ErrUnsupported) {
		t.Errorf("Restart of an external server: %v, want ErrUnsupported", err)
	}
	if _, err := s.Client(t).Get(context.Background(), "x"); err != nil {
		t.Errorf("a client of the external server: %v", err)
	}
}

// An ETCD_TEST_ENDPOINTS that nothing answers is no server: Launch fails
// with ErrNoServer, naming the variable, with the install hint.
func TestExternalUnreachable(t *testing.T) {
	t.Setenv(etcdtest.EnvEndpoints, "127.0.0.1:1")
	s, err := etcdtest.Launch(context.Background())
	if err == nil {
		s.Close()
		t.Fatal("Launch on an unreachable ETCD_TEST_ENDPOINTS succeeded")
	}
	if !errors.Is(err, etcdtest.ErrNoServer) || !strings.Contains(err.Error(), etcdtest.EnvEndpoints) || !strings.Contains(err.Error(), etcdtest.InstallHint) {
		t.Errorf("Launch: %v; want ErrNoServer naming %s with the install hint", err, etcdtest.EnvEndpoints)
	}
}

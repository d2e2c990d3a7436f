package fenceetcd_test

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestMain runs the tests with goleak and stops the shared etcd server.
func TestMain(m *testing.M) { etcdtest.Main(m) }

// env is one test's view of the shared server: a direct client and a key
// prefix of its own (emptied at the test's end).
type env struct {
	srv    *etcdtest.Server
	cli    *clientv3.Client
	prefix string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := etcdtest.Shared(t)
	return &env{srv: srv, cli: srv.Client(t), prefix: etcdtest.Prefix(t, srv)}
}

// fence returns a Fence on the env's prefix + "/fence/".
func (e *env) fence(t *testing.T) *fenceetcd.Fence {
	t.Helper()
	f, err := fenceetcd.New(e.cli, e.prefix+"/fence/")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// proxied returns a client of the server whose connections go through a
// FaultProxy of its own.
func (e *env) proxied(t *testing.T) (*clientv3.Client, *serverkit.FaultProxy) {
	t.Helper()
	p := serverkit.NewFaultProxy()
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return p.DialContext(ctx, "tcp", addr) }
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.srv.Endpoints(), DialTimeout: 10 * time.Second,
		Logger: zap.NewNop(), DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.Close()
		p.Close()
	})
	return cli, p
}

// keys returns the keys under the env's prefix.
func (e *env) keys(t *testing.T) []string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), e.prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

func (e *env) get(t *testing.T, key string) string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "<absent>"
	}
	return string(resp.Kvs[0].Value)
}

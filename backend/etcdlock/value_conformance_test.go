package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/testkit/valuetest"
)

// TestValueConformance runs the backend-neutral shared value suite
// (testkit/valuetest) against Value on the real server: every client has
// its own Session on its own etcd client, whose unary interceptor loses
// the answer to its next transaction (sent, answer replaced by
// Unavailable) or drops it unsent when asked (Cutter); values are deleted
// through the inspector (Deleter).
func TestValueConformance(t *testing.T) {
	t.Parallel()
	valuetest.Run(t, &valueHarness{e: newEnv(t)})
}

// valueHarness is the valuetest.Harness of Value.
type valueHarness struct{ e *env }

// valueName is the name of the suite's value named name.
func valueName(name string) string { return "valuetest/" + name }

// NewClient implements valuetest.Harness.
func (h *valueHarness) NewClient(tb testing.TB, name string) valuetest.Client {
	tb.Helper()
	c := &valueClient{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   h.e.srv.Endpoints(),
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.intercept)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(testTTL), etcdlock.WithPrefix(h.e.prefix), etcdlock.WithLogger(quiet))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if c.Value, err = etcdlock.NewValue(s, valueName(name)); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TooLarge implements valuetest.Harness.
func (h *valueHarness) TooLarge() int { return etcdlock.MaxValueData + 1 }

// Delete implements valuetest.Deleter, through the inspector.
func (h *valueHarness) Delete(ctx context.Context, name string) error {
	_, err := h.e.in.Delete(ctx, h.e.prefix+"/"+valueName(name)+"/_value_")
	return err
}

// valueClient is a value on its own Session and etcd client.
type valueClient struct {
	*etcdlock.Value
	fault atomic.Int32 // faultNone, faultSent or faultUnsent: for the next transaction
}

const (
	faultNone = iota
	faultSent
	faultUnsent
)

// CutNextWrite implements valuetest.Cutter.
func (c *valueClient) CutNextWrite(sent bool) {
	f := int32(faultUnsent)
	if sent {
		f = faultSent
	}
	c.fault.Store(f)
}

// intercept applies the armed fault to the next transaction.
func (c *valueClient) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := req.(*pb.TxnRequest); !ok {
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	switch c.fault.Swap(faultNone) {
	case faultSent:
		if err := invoke(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "test: the answer of a sent transaction was lost")
	case faultUnsent:
		return status.Error(codes.Unavailable, "test: the transaction was dropped unsent")
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

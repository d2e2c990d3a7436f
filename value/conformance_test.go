package value_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/valuetest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestConformance runs the backend-neutral shared value suite
// (testkit/valuetest) against Value on the shared server: every client has
// its own session, whose connection a RequestHook cuts around its next
// create or setData when asked (Cutter); values are deleted through the
// inspector's own connection (Deleter).
func TestConformance(t *testing.T) {
	cl := zktest.Shared(t)
	valuetest.Run(t, &confHarness{cl: cl, in: zktest.Inspect(t, cl)})
}

// confHarness is the valuetest.Harness of Value.
type confHarness struct {
	cl *zktest.Cluster
	in *zktest.Inspector
}

// confPath is the znode of the suite's value named name.
func confPath(name string) string { return "/valuetest/" + name + "/value" }

// NewClient implements valuetest.Harness.
func (h *confHarness) NewClient(tb testing.TB, name string) valuetest.Client {
	tb.Helper()
	c := &confClient{}
	s := rtest.Connect(tb, h.cl, zookeeper.WithDialer(zktest.RequestHook(nil, c.hook)))
	v, err := value.New(s, confPath(name))
	if err != nil {
		tb.Fatal(err)
	}
	c.Value = v
	return c
}

// TooLarge implements valuetest.Harness: the default packet limit is
// 1 MiB less a byte, for the whole request.
func (h *confHarness) TooLarge() int { return 1 << 20 }

// Delete implements valuetest.Deleter, through the inspector.
func (h *confHarness) Delete(_ context.Context, name string) error {
	err := h.in.Conn().Delete(h.cl.Chroot()+confPath(name), -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// confClient is a value on its own session, whose next write a fault can
// be armed for.
type confClient struct {
	*value.Value
	fault atomic.Int32 // the zktest.Fault of the next create or setData, then Pass
}

// CutNextWrite implements valuetest.Cutter.
func (c *confClient) CutNextWrite(sent bool) {
	f := zktest.DropAndCut
	if sent {
		f = zktest.SendAndCut
	}
	c.fault.Store(int32(f))
}

// hook is the client's RequestHook.
func (c *confClient) hook(op int32) zktest.Fault {
	if op == zktest.OpCreate || op == zktest.OpSetData {
		return zktest.Fault(c.fault.Swap(int32(zktest.Pass)))
	}
	return zktest.Pass
}

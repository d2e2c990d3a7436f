package fencehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// pausing is a RoundTripper that stops every request it is given, after
// fencehttp.Transport checked the lease and set the token, until resume is
// closed: the holder's process paused (GC, a frozen VM) between its last
// look at its lease and the send.
type pausing struct {
	base    http.RoundTripper
	entered chan struct{} // closed when the first request arrives
	resume  chan struct{}
	once    atomic.Bool
}

func newPausing(base http.RoundTripper) *pausing {
	return &pausing{base: base, entered: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pausing) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.once.CompareAndSwap(false, true) {
		close(p.entered)
	}
	<-p.resume
	return p.base.RoundTrip(r)
}

// call is a fenced PUT through client; it returns the handler's body and
// CheckResponse's error (or the transport's).
func call(ctx context.Context, client *http.Client, url, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return string(text), fencehttp.CheckResponse(resp)
}

// pausedHolder is the scenario, over any lock: A holds la and starts a
// request that pauses after its lease check; cut makes A lose the lock
// (A's process is frozen: its session stops talking); B acquires with
// acquireB and writes through the service; A resumes, its request is
// refused with 409, and its client sees fence.ErrStale. A's next request
// is not even sent (its lease has ended).
func pausedHolder(t *testing.T, srv *httptest.Server, url string, la recipe.Lease, cut func(), acquireB func() recipe.Lease, stored func() string) {
	t.Helper()
	p := newPausing(srv.Client().Transport)
	clientA := &http.Client{Transport: &fencehttp.Transport{Base: p, Lease: la}}
	resA := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), clientA, url, "written by A")
		resA <- err
	}()
	<-p.entered // A checked its lease (alive) and set its token: now it pauses
	cut()
	<-la.Context().Done()
	lb := acquireB()
	defer lb.Release(context.Background())
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %v is not above A's %v", lb.Token(), la.Token())
	}
	clientB := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport, Lease: lb}}
	if _, err := call(context.Background(), clientB, url, "written by B"); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	close(p.resume) // A resumes, believing it still holds the lock
	err := <-resA
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Token != la.Token() || se.Highest != lb.Token() {
		t.Fatalf("A's late write: %v, want a StaleError %v < %v", err, la.Token(), lb.Token())
	}
	if got := stored(); got != "written by B" {
		t.Fatalf("the resource holds %q", got)
	}
	// A's next request: its Transport sees the ended lease and sends nothing.
	if _, err := call(context.Background(), clientA, url, "again"); !errors.Is(err, fencehttp.ErrLeaseEnded) {
		t.Fatalf("A's request after its loss: %v", err)
	}
}

// TestPausedHolderMemlock: the paused stale holder on memlock, its loss
// made by a cut-off past the TTL, the service fenced by a Guard.
func TestPausedHolderMemlock(t *testing.T) {
	ms, err := memlock.NewServer(memlock.WithTTL(200 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	a, b := ms.Connect(memlock.WithLogger(quiet)), ms.Connect(memlock.WithLogger(quiet))
	defer a.Close()
	defer b.Close()
	ma, _ := memlock.New(a, "accounts")
	mb, _ := memlock.New(b, "accounts")
	la, err := ma.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var g fence.Guard
	var s store
	srv := serve(t, &g, putter(&s))
	pausedHolder(t, srv, srv.URL+"/accounts/42", la, a.CutOff, func() recipe.Lease {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lb, err := mb.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}, func() string { return s.get("42") })
}

// TestPausedHolderZooKeeper: the paused stale holder on a ZooKeeper mutex,
// its session blackholed past its timeout (FaultProxy), the service
// fenced by a fencezk register whose multi also sets the value znode.
func TestPausedHolderZooKeeper(t *testing.T) {
	cl := zktest.Shared(t)
	proxy := serverkit.NewFaultProxy()
	defer proxy.Close()
	sa := rtest.Connect(t, cl, zookeeper.WithDialer(proxy.Dial), zookeeper.WithSessionTimeout(time.Second), zookeeper.WithLogger(quiet))
	sb := rtest.Connect(t, cl, zookeeper.WithLogger(quiet))
	service := rtest.Connect(t, cl, zookeeper.WithLogger(quiet))
	ma, _ := mutex.New(sa, "/locks/accounts")
	mb, _ := mutex.New(sb, "/locks/accounts")
	la, err := ma.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(context.Background())

	f, err := fencezk.NewFence(service, "/fences")
	if err != nil {
		t.Fatal(err)
	}
	in := zktest.Inspect(t, cl)
	in.Create("/value", nil)
	// One register per account: a register's name is one znode name.
	account := func(r *http.Request) string { return "account-" + r.PathValue("id") }
	srv := serveAs(t, f, account, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := fencezk.AddOps(r.Context(), &zk.SetDataRequest{Path: "/value", Data: body, Version: -1}); err != nil {
			http.Error(w, "internal", 500)
		}
	})
	pausedHolder(t, srv, srv.URL+"/accounts/42", la, proxy.Blackhole, func() recipe.Lease {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		lb, err := mb.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}, func() string {
		data, _, err := in.Conn().Get(cl.Chroot() + "/value")
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	})
	proxy.Resume()
}

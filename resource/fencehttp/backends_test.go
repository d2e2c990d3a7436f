package fencehttp_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestZooKeeperFenceInput: fencezk.Fence refuses a resource that is not
// one znode name (400 bad-resource), a bad operation fails the write (500,
// nothing recorded), and AddOps works only inside a write.
func TestZooKeeperFenceInput(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl, zookeeper.WithLogger(quiet))
	f, err := fencezk.NewFence(s, "/fences")
	if err != nil {
		t.Fatal(err)
	}
	if err := fencezk.AddOps(context.Background()); !errors.Is(err, fencezk.ErrNoBatch) {
		t.Fatalf("AddOps outside a write: %v", err)
	}
	var leaked context.Context
	srv := serveAs(t, f, func(r *http.Request) string { return r.URL.Query().Get("r") }, func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Context()
		fencezk.AddOps(r.Context(), &zk.SetDataRequest{Path: "/no/such/node", Version: -1})
	})
	for _, name := range []string{"a/b", "..", "."} {
		resp, _, err := put(t, srv, "x?r="+name, "", "5")
		if resp.StatusCode != 400 || !errors.Is(err, fence.ErrBadResource) {
			t.Fatalf("%q: %d %v", name, resp.StatusCode, err)
		}
	}
	resp, _, err := put(t, srv, "x?r=ok", "", "5")
	if resp.StatusCode != 500 || !errors.Is(err, fencehttp.ErrRefused) {
		t.Fatalf("a refused op: %d %v", resp.StatusCode, err)
	}
	r, _ := f.Register("ok")
	if v, err := r.Read(context.Background()); err != nil || v.Token != 0 {
		t.Fatalf("recorded %v after a refused op (%v)", v.Token, err)
	}
	if err := fencezk.AddOps(leaked, &zk.DeleteRequest{Path: "/x"}); !errors.Is(err, fencezk.ErrNoBatch) {
		t.Fatalf("AddOps after the write: %v", err)
	}
}

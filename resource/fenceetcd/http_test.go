package fenceetcd_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestHTTPHandler: the fence behind fencehttp's handler on a real HTTP
// server (fencetest.RunHTTP), its handler adding its write with AddOps.
func TestHTTPHandler(t *testing.T) {
	e := newEnv(t)
	data := e.prefix + "/data"
	add := func(ctx context.Context, body string) error { return fenceetcd.AddOps(ctx, clientv3.OpPut(data, body)) }
	fencetest.RunHTTP(t, e.fence(t), add, func() string { return e.get(t, data) })
}

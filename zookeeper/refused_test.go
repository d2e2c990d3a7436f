package zookeeper_test

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestRefusedCreateQueuesNoCleanup: a create the server refused (the
// directory's ACL gives the session no CREATE: a wrong digest password)
// created nothing, so a failed TryAcquire or Acquire has nothing to clean
// up. It used to look for its node by GUID all the same, which the ACL
// refuses too, and hand that search to the session's cleaner with a
// warning ("cleanup delete deferred to the session cleaner ... not
// authenticated") before the ACL error was even reported.
func TestRefusedCreateQueuesNoCleanup(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	servers := cl.Servers()
	chroot := strings.TrimPrefix(servers[len(servers)-1], cl.Addrs()[len(servers)-1]) // Conn's paths are not under it
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, err := zookeeper.Connect(ctx, servers, zookeeper.WithAuth("digest", []byte("zkr:"+zkPW)))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	dir := "/zkr-refused-" + rand.Text()[:8]
	if _, err := owner.Conn().Create(chroot+dir, nil, 0, zk.DigestACL(zk.PermAll, "zkr", zkPW)); err != nil {
		t.Fatal(err)
	}
	defer owner.Conn().Delete(chroot+dir, -1)
	other, err := zookeeper.Connect(ctx, servers, zookeeper.WithLogger(log), zookeeper.WithAuth("digest", []byte("zkr:"+zkPW+"-wrong")))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	q, err := zookeeper.NewQueue(other, dir, []string{"lock-"}, zookeeper.FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	for name, acquire := range map[string]func(context.Context, string, []byte) (recipe.Lease, error){
		"TryAcquire": q.TryAcquire, "Acquire": q.Acquire,
	} {
		if l, err := acquire(ctx, "lock-", nil); err == nil {
			_ = l.Release(ctx)
			t.Fatalf("%s with a wrong digest password succeeded", name)
		} else if !errors.Is(err, recipe.ErrNoPermission) {
			t.Fatalf("%s with a wrong digest password: %v, want ErrNoPermission", name, err)
		}
	}
	if n := zkside.SessionOf(other).PendingCleanup(); n != 0 {
		t.Errorf("%d cleanup deletes queued after creates the server refused", n)
	}
	if out := logs.String(); strings.Contains(out, "cleanup") {
		t.Errorf("a cleanup was logged after creates the server refused:\n%s", out)
	}
	noSecret(t, "the log", logs.String())
}

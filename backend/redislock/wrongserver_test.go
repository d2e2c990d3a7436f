package redislock_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// TestConnectWrongServer (issue 24): a server of another protocol at the
// URL's address (a real net/http server, one that greets like SSH) fails
// Connect within connerrtest.WrongWithin, matching recipe.ErrWrongServer
// and recipe.ErrUnreachable and naming what answered, never the URL's
// password; before, it failed at once but said only "can't parse map
// reply", matching no sentinel. The right server still connects.
func TestConnectWrongServer(t *testing.T) {
	ctx := context.Background()
	const password = "s3cr3t-zkr-wrongserver"
	connerrtest.CheckWrongServers(t, "a Redis", password, func(addr string) error {
		s, err := redislock.Connect(ctx, "redis://:"+password+"@"+addr+"/0?dial_timeout=10s")
		if err == nil {
			s.Close()
		}
		return err
	})

	s, err := redislock.Connect(ctx, redistest.Start(t).URL())
	if err != nil {
		t.Fatalf("the right server: %v", err)
	}
	s.Close()
}

package zktest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// startExternal uses the ensemble listed in ZK_TEST_SERVERS. It checks that
// a session can be opened and, when withChroot is set, creates the cluster's
// own chroot, which Close deletes. The servers cannot be controlled.
func startExternal(ctx context.Context, cfg config, list, name string, withChroot bool) (*Cluster, error) {
	var addrs []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("bad server %q (want host:port): %w", s, err)
		}
		addrs = append(addrs, s)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no servers listed")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c := &Cluster{provider: "env", addrs: addrs, noCtrl: "an external ensemble (" + EnvServers + ")"}
	if !withChroot {
		if err := withConn(ctx, addrs, cfg.logger, func(*zk.Conn) error { return nil }); err != nil {
			return nil, err
		}
		return c, nil
	}
	path := newChrootPath(name)
	if err := createChroot(ctx, addrs, path, cfg.logger); err != nil {
		return nil, err
	}
	c.chroot = path
	c.closeFn = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return deleteChroot(ctx, addrs, path, cfg.logger)
	}
	return c, nil
}

package zktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
)

// dockerImage is the image the container provider runs.
const dockerImage = "zookeeper:3.8"

// dockerProvider runs one standalone server in a container when a Docker daemon
// answers. The container cannot be controlled (no Stop, Kill, ...).
func dockerProvider(ctx context.Context, cfg config) (c *Cluster, err error) {
	if cfg.ensemble > 1 {
		return nil, fmt.Errorf("only standalone servers are supported, not an ensemble of %d", cfg.ensemble)
	}
	// testcontainers panics in some set-ups without Docker.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("testcontainers panicked: %v", r)
		}
	}()
	quiet := testcontainers.WithLogger(tclog.NewNoopLogger())
	p, err := testcontainers.NewDockerProvider(quiet)
	if err != nil {
		return nil, fmt.Errorf("no Docker: %w", err)
	}
	if err := p.Health(ctx); err != nil { // Health closes p
		return nil, fmt.Errorf("no Docker daemon answers: %w", err)
	}

	tick := cfg.tick.Milliseconds()
	ctr, err := testcontainers.Run(ctx, dockerImage, quiet,
		testcontainers.WithExposedPorts("2181/tcp"),
		testcontainers.WithEnv(map[string]string{
			"ZOO_TICK_TIME":              strconv.FormatInt(tick, 10),
			"ZOO_4LW_COMMANDS_WHITELIST": "*",
			"ZOO_ADMINSERVER_ENABLED":    "false",
			"ZOO_CFG_EXTRA": fmt.Sprintf("forceSync=no minSessionTimeout=%d maxSessionTimeout=60000 "+
				"serverCnxnFactory=%s", 2*tick, nettyFactory),
			"JVMFLAGS": "-Dznode.container.checkIntervalMs=1000 -XX:+UseSerialGC -Xms64m -Xmx512m",
		}),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("2181/tcp").WithStartupTimeout(readyTimeout)),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running %s: %w", dockerImage, err), testcontainers.TerminateContainer(ctr))
	}
	addr, err := ctr.PortEndpoint(ctx, "2181/tcp", "")
	if err == nil {
		err = waitServing(ctx, addr)
	}
	if err != nil {
		return nil, errors.Join(err, testcontainers.TerminateContainer(ctr))
	}
	cfg.logger.Info("zktest: started ZooKeeper container", "image", dockerImage, "addr", addr)
	return &Cluster{
		provider: "docker",
		addrs:    []string{addr},
		noCtrl:   "a container",
		closeFn:  func() error { return testcontainers.TerminateContainer(ctr) },
	}, nil
}

// waitServing polls srvr until addr serves, up to readyTimeout.
func waitServing(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		_, err := serverMode(qctx, addr)
		qcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving: %w", addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

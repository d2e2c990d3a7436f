package zktest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// dockerImage is the image the container provider runs.
const dockerImage = "zookeeper:3.8"

// containersPkg is the program that runs the container (testcontainers-go),
// in a module of its own: the root module's graph holds neither
// testcontainers-go nor what it requires. The container provider builds it
// with the go command, the first time costing about a minute on 2 cores.
const containersPkg = "github.com/zkrecipes/zkrecipes/testkit/containers"

// dockerProvider runs one standalone server in a container when a Docker daemon
// answers. The container cannot be controlled (no Stop, Kill, ...).
func dockerProvider(ctx context.Context, cfg config) (*Cluster, error) {
	if cfg.ensemble > 1 {
		return nil, fmt.Errorf("only standalone servers are supported, not an ensemble of %d", cfg.ensemble)
	}
	dir, err := os.MkdirTemp("", "zktest-containers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // the running binary keeps its inode
	bin, err := buildContainers(ctx, dir)
	if err != nil {
		return nil, err
	}
	tick := cfg.tick.Milliseconds()
	args := []string{"-image", dockerImage, "-port", "2181/tcp", "-timeout", readyTimeout.String()}
	for _, kv := range []string{
		"ZOO_TICK_TIME=" + strconv.FormatInt(tick, 10),
		"ZOO_4LW_COMMANDS_WHITELIST=*",
		"ZOO_ADMINSERVER_ENABLED=false",
		fmt.Sprintf("ZOO_CFG_EXTRA=forceSync=no minSessionTimeout=%d maxSessionTimeout=60000 serverCnxnFactory=%s", 2*tick, nettyFactory),
		"JVMFLAGS=-Dznode.container.checkIntervalMs=1000 -XX:+UseSerialGC -Xms64m -Xmx512m " + cfg.jitFlag(),
	} {
		args = append(args, "-env", kv)
	}
	ctr, addr, err := startContainer(ctx, bin, args)
	if err != nil {
		return nil, err
	}
	if err := waitServing(ctx, addr); err != nil {
		return nil, errors.Join(err, ctr.stop())
	}
	cfg.logger.Info("zktest: started ZooKeeper container", "image", dockerImage, "addr", addr)
	return &Cluster{
		provider: "docker",
		addrs:    []string{addr},
		noCtrl:   "a container",
		closeFn:  ctr.stop,
	}, nil
}

// buildContainers builds containersPkg into dir and returns the binary:
// from the module graph of the directory the test runs in (the repository's
// workspace, or a module that requires it), or, when the test binary was
// built with a released version of the root module, at that version.
func buildContainers(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), containersPkg)
	if v := releasedVersion(); v != "" {
		cmd = exec.CommandContext(ctx, "go", "install", containersPkg+"@"+v)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s (%s): %v: %s", containersPkg, strings.Join(cmd.Args, " "), err, bytes.TrimSpace(out))
	}
	return filepath.Join(dir, "containers"), nil
}

// releasedVersion returns the version of the root module this binary was
// built with, if it came from a module proxy (not a directory: the test's
// own module, or one replaced by a directory as go.work does).
func releasedVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	root := strings.TrimSuffix(containersPkg, "/testkit/containers")
	for _, m := range info.Deps {
		if m.Path == root && m.Replace == nil && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return ""
}

// container is a running containersPkg: closing its standard input
// terminates the container.
type container struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *bytes.Buffer
	done   chan struct{} // closed when cmd was waited for
	err    error         // cmd.Wait's, once done
}

// startContainer starts bin with args and waits for its "addr HOST:PORT"
// line.
func startContainer(ctx context.Context, bin string, args []string) (*container, string, error) {
	c := &container{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	c.stdin = stdin
	if err := serverkit.StartChild(c.cmd); err != nil {
		return nil, "", err
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, stdout)
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	select {
	case line := <-lines:
		if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr "); ok {
			return c, addr, nil
		}
		<-c.done
		return nil, "", fmt.Errorf("%v: %s", c.err, bytes.TrimSpace(c.stderr.Bytes()))
	case <-ctx.Done():
		return nil, "", errors.Join(context.Cause(ctx), c.stop())
	}
}

// stop closes the program's standard input and waits for it to terminate
// the container and exit (killing it after a minute).
func (c *container) stop() error {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		<-c.done
	}
	if c.err != nil {
		return fmt.Errorf("stopping the container: %v: %s", c.err, bytes.TrimSpace(c.stderr.Bytes()))
	}
	return nil
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

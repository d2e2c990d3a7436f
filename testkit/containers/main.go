// Command containers runs one container for a test harness, with
// testcontainers-go, and keeps it until its standard input closes: it is
// testkit/zktest's container-backed ZooKeeper, the last provider tried when
// no local install works and a Docker daemon answers. It is a module of its
// own so that testcontainers-go (and the Docker client, OpenTelemetry, ...
// it requires) stays out of the root module's graph: zktest builds it with
// the go command when it needs it, and talks to it over its standard
// streams.
//
// Usage:
//
//	containers -image IMAGE -port PORT/tcp [-env NAME=VALUE]... [-timeout 30s]
//
// It checks that a Docker daemon answers, runs IMAGE with PORT exposed and
// the environment given, waits until PORT listens, and prints one line,
// "addr HOST:PORT" (the port's address on this host), on standard output.
// When its standard input reaches its end (the harness closed it, or died)
// or it gets SIGINT or SIGTERM, it terminates the container and exits. On
// failure it prints the reason on standard error and exits with status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
)

// envFlags collects the -env NAME=VALUE flags.
type envFlags map[string]string

func (e envFlags) String() string { return fmt.Sprint(map[string]string(e)) }

func (e envFlags) Set(kv string) error {
	name, value, ok := strings.Cut(kv, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", kv)
	}
	e[name] = value
	return nil
}

func main() {
	env := envFlags{}
	image := flag.String("image", "", "the image to run")
	port := flag.String("port", "", "the port to expose and wait for, as PORT/tcp")
	timeout := flag.Duration("timeout", 30*time.Second, "how long the port may take to listen")
	flag.Var(env, "env", "NAME=VALUE of the container's environment (repeated)")
	flag.Parse()
	if *image == "" || *port == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *image, *port, env, *timeout, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}

// run runs the container, prints its address to out, and terminates it
// when in reaches its end or ctx ends.
func run(ctx context.Context, image, port string, env map[string]string, timeout time.Duration, in io.Reader, out io.Writer) (err error) {
	// testcontainers panics in some set-ups without Docker.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers panicked: %v", r)
		}
	}()
	quiet := testcontainers.WithLogger(tclog.NewNoopLogger())
	p, err := testcontainers.NewDockerProvider(quiet)
	if err != nil {
		return fmt.Errorf("no Docker: %w", err)
	}
	if err := p.Health(ctx); err != nil { // Health closes p
		return fmt.Errorf("no Docker daemon answers: %w", err)
	}
	ctr, err := testcontainers.Run(ctx, image, quiet,
		testcontainers.WithExposedPorts(port),
		testcontainers.WithEnv(env),
		testcontainers.WithWaitStrategy(wait.ForListeningPort(port).WithStartupTimeout(timeout)),
	)
	if err != nil {
		return errors.Join(fmt.Errorf("running %s: %w", image, err), testcontainers.TerminateContainer(ctr))
	}
	defer func() { err = errors.Join(err, testcontainers.TerminateContainer(ctr)) }()
	addr, err := ctr.PortEndpoint(ctx, port, "")
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "addr %s\n", addr); err != nil {
		return err
	}
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, in) // until the harness closes it
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

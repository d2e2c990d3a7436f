package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// proxyEnv, when set, makes zkbench a latency proxy instead of a benchmark
// (runProxy): its value is "LATENCY host:port,host:port", as startProxy
// writes it. It is not a user option: -latency starts that process.
const proxyEnv = "ZKBENCH_LATENCY_PROXY"

// startProxy starts zkbench again as a separate process that listens on a
// free port of 127.0.0.1 for each server of addrs and forwards to it,
// delaying every chunk by latency in each direction (serverkit.FaultProxy's
// Listen and SetLatency). A process of its own, so that the proxy's CPU
// time is not counted as the Go peers' client CPU. It returns the
// addresses to connect to, in the order of addrs, and stop, which closes
// the proxy's stdin (it exits then, as it does when zkbench dies) and
// waits for it.
func startProxy(ctx context.Context, addrs []string, latency time.Duration) (proxied []string, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s", proxyEnv, latency, strings.Join(addrs, ",")))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop = func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, stdout) // until the proxy exits
	}()
	select {
	case l := <-line:
		proxied = strings.Fields(l)
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	if len(proxied) != len(addrs) {
		stop()
		return nil, nil, fmt.Errorf("the latency proxy did not give %d address(es) (got %q)", len(addrs), proxied)
	}
	return proxied, stop, nil
}

// runProxy is zkbench's latency-proxy mode (see proxyEnv): it prints the
// listening addresses on one line, forwards until its stdin closes, and
// returns the process's exit code.
func runProxy(spec string) int {
	lat, targets, ok := strings.Cut(spec, " ")
	d, err := time.ParseDuration(lat)
	if !ok || err != nil || targets == "" {
		fmt.Fprintf(os.Stderr, "zkbench proxy: bad %s=%q\n", proxyEnv, spec)
		return 2
	}
	p := serverkit.NewFaultProxy()
	defer p.Close()
	p.SetLatency(d)
	var out []string
	for _, t := range strings.Split(targets, ",") {
		a, err := p.Listen(t)
		if err != nil {
			fmt.Fprintln(os.Stderr, "zkbench proxy:", err)
			return 1
		}
		out = append(out, a)
	}
	fmt.Println(strings.Join(out, " "))
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil && !errors.Is(err, os.ErrClosed) {
		fmt.Fprintln(os.Stderr, "zkbench proxy: stdin:", err)
	}
	return 0
}

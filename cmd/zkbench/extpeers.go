package main

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// peerSources are the peer drivers, written to a temporary directory at run
// time (the Java one is compiled there).
//
//go:embed peers/Bench.java peers/BenchCnxnSocket.java peers/Participants.java peers/CacheBench.java peers/kazoo_bench.py
var peerSources embed.FS

// debianJars is the classpath of the Curator driver (Debian packages
// libcurator-recipes-java and zookeeper).
var debianJars = []string{
	"curator-recipes.jar", "curator-framework.jar", "curator-client.jar",
	"zookeeper.jar", "zookeeper-jute.jar", "guava.jar", "slf4j-api.jar", "slf4j-nop.jar",
	"netty-handler.jar", "netty-transport.jar", "netty-common.jar", "netty-buffer.jar",
	"netty-resolver.jar", "netty-codec.jar", "netty-transport-native-unix-common.jar",
	"netty-transport-native-epoll.jar",
}

// errNotInstalled marks a peer whose runtime or library is missing.
var errNotInstalled = errors.New("not installed")

// extPeer is a peer driver running as a subprocess: it reads one
// "run key=value ..." line per workload on stdin and writes one JSON Result
// line on stdout. Before that, at each edge of each of the workload's
// measured phases (a loop workload has one, a waiters workload one per
// cycle: its hand-offs), it writes {"mark":"start"} or {"mark":"end"} and
// waits for a "go" line, while zkbench samples the phase (meter: packets,
// the driver's CPU, the server's CPU); the phases are added up.
type extPeer struct {
	name   string
	meter  meter
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	logf   *os.File
	logPth string
}

func (p *extPeer) Name() string { return p.name }

// Waiters reports true: the drivers run every workload.
func (p *extPeer) Waiters() bool { return true }

// startExt writes the embedded sources to dir, prepares and starts the
// driver named name ("curator" or "kazoo") and waits for its ready line.
// m samples the phases; startExt sets its clientPID to the driver's.
func startExt(ctx context.Context, name, dir, python string, servers string, spread bool, m meter) (*extPeer, error) {
	if err := writeSources(dir); err != nil {
		return nil, err
	}
	var argv []string
	switch name {
	case "curator":
		java, err := exec.LookPath("java")
		if err != nil {
			return nil, fmt.Errorf("%w: no java on PATH (apt-get install -y default-jdk-headless)", errNotInstalled)
		}
		javac, err := exec.LookPath("javac")
		if err != nil {
			return nil, fmt.Errorf("%w: no javac on PATH (apt-get install -y default-jdk-headless)", errNotInstalled)
		}
		cp, err := curatorClasspath(ctx, javac, dir, "Bench.java", "BenchCnxnSocket.java")
		if err != nil {
			return nil, err
		}
		argv = []string{java, "-Xss512k", "-Xmx1g", "-cp", cp}
		if spread {
			argv = append(argv, "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.BenchCnxnSocket")
		}
		argv = append(argv, "Bench")
	case "kazoo":
		if out, err := exec.CommandContext(ctx, python, "-c", "import kazoo").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%w: %s cannot import kazoo (apt-get install -y python3-kazoo): %s", errNotInstalled, python, strings.TrimSpace(string(out)))
		}
		argv = []string{python, "-u", filepath.Join(dir, "peers", "kazoo_bench.py")}
	default:
		return nil, fmt.Errorf("unknown peer %q", name)
	}
	argv = append(argv, "--servers", servers, fmt.Sprintf("--spread=%t", spread))

	logPth := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPth)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	m.clientPID = cmd.Process.Pid
	p := &extPeer{name: name, meter: m, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), logf: logf, logPth: logPth}
	p.out.Buffer(make([]byte, 1<<20), 1<<20)
	line, err := p.readLine(ctx, 2*time.Minute)
	if err != nil || !strings.Contains(line, `"ready"`) {
		p.Close()
		return nil, fmt.Errorf("%s driver did not start (%q, %v); its log:\n%s", name, line, err, p.logTail())
	}
	return p, nil
}

// curatorClasspath compiles the given peer sources (written to dir by
// writeSources) with javac against Curator's Debian jars, and returns the
// classpath to run them with: the classes, then the jars.
func curatorClasspath(ctx context.Context, javac, dir string, sources ...string) (string, error) {
	var cp []string
	for _, j := range debianJars {
		p := filepath.Join("/usr/share/java", j)
		if _, err := os.Stat(p); err != nil {
			if strings.HasPrefix(j, "curator-") || strings.HasPrefix(j, "zookeeper") {
				return "", fmt.Errorf("%w: no %s (apt-get install -y libcurator-recipes-java)", errNotInstalled, p)
			}
			continue
		}
		cp = append(cp, p)
	}
	classes := filepath.Join(dir, "classes")
	args := []string{"-nowarn", "-d", classes, "-cp", strings.Join(cp, ":")}
	for _, src := range sources {
		args = append(args, filepath.Join(dir, "peers", src))
	}
	if out, err := exec.CommandContext(ctx, javac, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac: %v\n%s", err, out)
	}
	return strings.Join(append([]string{classes}, cp...), ":"), nil
}

func writeSources(dir string) error {
	entries, err := peerSources.ReadDir("peers")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "peers"), 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		b, err := peerSources.ReadFile("peers/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "peers", e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readLine reads one line of the driver's stdout within d.
func (p *extPeer) readLine(ctx context.Context, d time.Duration) (string, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		if p.out.Scan() {
			ch <- res{p.out.Text(), nil}
			return
		}
		err := p.out.Err()
		if err == nil {
			err = io.EOF
		}
		ch <- res{"", err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(d):
		// The reader goroutine ends when Close kills the process.
		return "", fmt.Errorf("no answer within %v", d)
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func (p *extPeer) logTail() string {
	b, _ := os.ReadFile(p.logPth)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Run sends one workload, samples its phases at the driver's marks and
// reads its result; when ctx ends it stops waiting (Close then kills the
// driver).
func (p *extPeer) Run(ctx context.Context, s Spec) Result {
	r := Result{Type: "run", Peer: p.name, Workload: s.Name(), HeapPerWaiter: -1}
	if _, err := fmt.Fprintln(p.stdin, s.line()); err != nil {
		r.Error = err.Error()
		return r
	}
	var start, sum phase // sum: of the phases ended so far
	phases := 0
	var sampleErr error
	for {
		line, err := p.readLine(ctx, 15*time.Minute)
		if err != nil {
			r.Error = fmt.Sprintf("%v; driver log:\n%s", err, p.logTail())
			return r
		}
		var mk struct {
			Mark string `json:"mark"`
		}
		if json.Unmarshal([]byte(line), &mk) == nil && mk.Mark != "" {
			switch mk.Mark {
			case "start":
				if sampleErr == nil { // the first error stands
					start, sampleErr = p.meter.begin(ctx)
				}
			case "end":
				if sampleErr == nil {
					var ph phase
					ph, sampleErr = p.meter.end(ctx, start)
					sum = sum.add(ph)
					phases++
				}
			}
			if _, err := fmt.Fprintln(p.stdin, "go"); err != nil {
				r.Error = err.Error()
				return r
			}
			continue
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			r.Error = fmt.Sprintf("bad driver line %q: %v", line, err)
		}
		break
	}
	r.Type, r.Peer, r.Workload = "run", p.name, s.Name()
	if phases == 0 {
		sum = phase{packets: -1, cli: -1, srv: -1} // no phase: nothing measured
	}
	r.setPhase(sum)
	if sampleErr != nil && r.Error == "" {
		r.Error = "sampling the phase: " + sampleErr.Error()
	}
	return r
}

// Close asks the driver to exit, and kills it after 3 s.
func (p *extPeer) Close() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	return p.logf.Close()
}

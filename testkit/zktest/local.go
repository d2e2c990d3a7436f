//go:build unix

package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

const (
	// readyTimeout bounds the wait for servers to serve after a (re)start.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds the wait for a graceful stop before SIGKILL.
	stopTimeout = 10 * time.Second
	// portAttempts is how many times a cluster is started on fresh ports
	// when a port turned out to be taken (another package's server won a race).
	portAttempts = 4
	// debianJar is where Debian's zookeeper package puts the server jar; its
	// manifest's Class-Path names all its dependencies.
	debianJar = "/usr/share/java/zookeeper.jar"
	// slf4jSimple gives the Debian server a log binding (it has none, so
	// it would log nothing at all).
	slf4jSimple = "/usr/share/java/slf4j-simple.jar"
	// debianNettyCodec is missing from the Class-Path of Debian's jar, and
	// the Netty connection factory needs it.
	debianNettyCodec = "/usr/share/java/netty-codec.jar"
	mainClass        = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
)

// errPortInUse marks a start that failed because a port was taken.
var errPortInUse = errors.New("port already in use")

// install is a Java runtime and a ZooKeeper classpath.
type install struct {
	java      string
	classpath string
	// netty says Netty's codec is on the classpath, so the Netty connection
	// factory can be used (see nettyFactory).
	netty bool
}

// errExplicitInstall marks an install the environment names explicitly
// (JAVA_HOME, ZOOKEEPER_HOME) that is unusable: no other install or
// provider may stand in for it, or a run meant for one ZooKeeper version
// would silently test another.
var errExplicitInstall = errors.New("an install named by the environment is unusable")

// findInstall looks for java ($JAVA_HOME/bin/java, then PATH) and the
// ZooKeeper jars ($ZOOKEEPER_HOME/lib, then Debian's jar). A JAVA_HOME or
// ZOOKEEPER_HOME that is set but unusable is an error (errExplicitInstall),
// never a reason to fall back.
func findInstall() (install, error) {
	var in install
	var why []string
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		p := filepath.Join(jh, "bin", "java")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			in.java = p
		} else {
			return in, fmt.Errorf("%w: JAVA_HOME=%s has no bin/java", errExplicitInstall, jh)
		}
	}
	if in.java == "" {
		p, err := exec.LookPath("java")
		if err != nil {
			why = append(why, "no java on PATH")
		} else {
			in.java = p
		}
	}

	if zh := os.Getenv("ZOOKEEPER_HOME"); zh != "" {
		jars, _ := filepath.Glob(filepath.Join(zh, "lib", "*.jar"))
		if len(jars) > 0 {
			codec, _ := filepath.Glob(filepath.Join(zh, "lib", "netty-codec-[0-9]*.jar"))
			in.netty = len(codec) > 0
			cp := []string{filepath.Join(zh, "lib", "*")}
			if st, err := os.Stat(filepath.Join(zh, "conf")); err == nil && st.IsDir() {
				cp = append(cp, filepath.Join(zh, "conf"))
			}
			in.classpath = strings.Join(cp, string(os.PathListSeparator))
		} else {
			return in, fmt.Errorf("%w: ZOOKEEPER_HOME=%s has no lib/*.jar", errExplicitInstall, zh)
		}
	}
	if in.classpath == "" {
		if _, err := os.Stat(debianJar); err == nil {
			cp := []string{debianJar}
			if _, err := os.Stat(slf4jSimple); err == nil {
				cp = append(cp, slf4jSimple)
			}
			if _, err := os.Stat(debianNettyCodec); err == nil {
				cp = append(cp, debianNettyCodec)
				in.netty = true
			}
			in.classpath = strings.Join(cp, string(os.PathListSeparator))
		} else {
			why = append(why, "no "+debianJar+" and ZOOKEEPER_HOME is not set")
		}
	}
	if in.java == "" || in.classpath == "" {
		return in, errors.New(strings.Join(why, ", "))
	}
	return in, nil
}

// localCluster is a set of ZooKeeper JVMs started by zktest.
type localCluster struct {
	in    install
	cfg   config
	dir   string
	ports []int     // reserved (serverkit.FreePorts) until close
	tls   *tlsSetup // nil without WithTLS

	mu     sync.Mutex // guards nodes' processes, closed and keep
	nodes  []*node
	closed bool
	keep   bool // close leaves dir on disk
}

type node struct {
	index                 int
	clientPort, peerPort  int
	electionPort          int
	securePort            int // 0 without WithTLS
	dir, cfgPath, logPath string
	proc                  *process // nil when not started or reaped
}

// startLocal starts cfg.ensemble JVMs, retrying on fresh ports when one was
// taken between choosing and binding it.
func startLocal(ctx context.Context, cfg config) (*Cluster, error) {
	in, err := findInstall()
	if err != nil {
		return nil, err
	}
	var seedDir string
	if len(cfg.seqCounters) > 0 {
		sweepOnce.Do(sweepStale)
		if seedDir, err = seedData(ctx, cfg, in); err != nil {
			return nil, err
		}
		defer os.RemoveAll(seedDir)
	}
	var lastErr error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		lc, err := startLocalOnce(ctx, cfg, in, seedDir)
		if err == nil {
			return lc.cluster(), nil
		}
		lastErr = err
		if !errors.Is(err, errPortInUse) || ctx.Err() != nil {
			break
		}
		cfg.logger.Info("zktest: port clash, retrying on other ports", "attempt", attempt, "err", err)
	}
	return nil, lastErr
}

func (lc *localCluster) cluster() *Cluster {
	addrs := make([]string, len(lc.nodes))
	for i, n := range lc.nodes {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.clientPort))
	}
	return &Cluster{provider: "local", addrs: addrs, ctrl: lc, closeFn: lc.close, logTails: lc.logTails, keep: lc.keepDirs,
		tls: lc.tls, secureAddrs: lc.secureAddrs()}
}

// keepDirs makes close leave lc.dir and takes it out of sweepStale's reach
// (which only removes directories that name their owner).
func (lc *localCluster) keepDirs() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if !lc.keep {
		lc.keep = true
		_ = os.Remove(filepath.Join(lc.dir, ownerFile))
	}
	return lc.dir
}

// startLocalOnce starts the servers on fresh ports; a seedDir that is not
// empty holds the seeded data (seedData) to copy into each data directory.
func startLocalOnce(ctx context.Context, cfg config, in install, seedDir string) (*localCluster, error) {
	sweepOnce.Do(sweepStale)
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lc := &localCluster{in: in, cfg: cfg, dir: dir}
	n := cfg.ensemble
	perNode := 1
	if n > 1 {
		perNode = 3
	}
	if lc.tls, err = newTLSSetup(dir, cfg, in); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	perNode += lc.tls.ports() // the last port of each node is its TLS port
	ports, err := serverkit.FreePorts(n * perNode)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lc.ports = ports
	for i := range n {
		nd := &node{index: i, clientPort: ports[i*perNode], dir: filepath.Join(dir, fmt.Sprintf("server%d", i+1))}
		if n > 1 {
			nd.peerPort, nd.electionPort = ports[i*perNode+1], ports[i*perNode+2]
		}
		if lc.tls != nil {
			nd.securePort = ports[i*perNode+perNode-1]
		}
		nd.cfgPath = filepath.Join(nd.dir, "zoo.cfg")
		nd.logPath = filepath.Join(nd.dir, "server.log")
		lc.nodes = append(lc.nodes, nd)
	}
	for _, nd := range lc.nodes {
		if err := lc.writeConfig(nd); err != nil {
			_ = lc.close()
			return nil, err
		}
		if seedDir != "" {
			if err := copySeed(seedDir, filepath.Join(nd.dir, "data")); err != nil {
				_ = lc.close()
				return nil, seedError{fmt.Errorf("zktest: WithSeqCounters: copying the seeded data: %w", err)}
			}
		}
	}
	lc.mu.Lock()
	for _, nd := range lc.nodes {
		if err := lc.spawnNode(nd); err != nil {
			lc.mu.Unlock()
			_ = lc.close()
			return nil, err
		}
	}
	lc.mu.Unlock()
	for _, nd := range lc.nodes {
		if err := lc.waitReady(ctx, nd); err != nil {
			_ = lc.close()
			return nil, err
		}
	}
	cfg.logger.Info("zktest: started local ZooKeeper", "servers", n, "dir", dir, "ports", ports)
	return lc, nil
}

func (lc *localCluster) writeConfig(nd *node) error {
	dataDir := filepath.Join(nd.dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	tick := lc.cfg.tick.Milliseconds()
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", tick)
	b.WriteString("initLimit=20\nsyncLimit=10\n")
	fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", nd.clientPort)
	b.WriteString("admin.enableServer=false\nforceSync=no\n4lw.commands.whitelist=*\n")
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=60000\n", 2*tick)
	if lc.tls != nil {
		lc.tls.writeConfig(&b, nd.securePort)
	}
	if len(lc.nodes) > 1 {
		b.WriteString("standaloneEnabled=false\n")
		for _, o := range lc.nodes {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", o.index+1, o.peerPort, o.electionPort)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(nd.index+1)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(nd.cfgPath, []byte(b.String()), 0o644)
}

// spawnNode starts nd's JVM. lc.mu must be held.
func (lc *localCluster) spawnNode(nd *node) error {
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "=== zktest: starting server %d at %s ===\n", nd.index+1, time.Now().Format(time.RFC3339Nano))
	args := []string{
		"-XX:+UseSerialGC", "-Xms64m", "-Xmx512m", "-XX:-UsePerfData",
		"-Djava.awt.headless=true",
		"-Dzookeeper.log.dir=" + nd.dir,
		// Empty container znodes are reaped within a second, not a minute.
		"-Dznode.container.checkIntervalMs=1000",
		// Peers give up on a dead or paused peer sooner, and elections
		// after a failure take a second or two.
		"-Dzookeeper.cnxTimeout=1000",
		"-Dzookeeper.fastleader.maxNotificationInterval=1000",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
	}
	if lc.in.netty {
		args = append(args, "-Dzookeeper.serverCnxnFactory="+nettyFactory)
	}
	if f := lc.cfg.jitFlag(); f != "" {
		args = append(args, f)
	}
	args = append(args, "-cp", lc.in.classpath, mainClass, nd.cfgPath)
	cmd := exec.Command(lc.in.java, args...)
	cmd.Dir = nd.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := serverkit.StartChild(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", lc.in.java, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	nd.proc = p
	return nil
}

// waitReady polls srvr until nd serves, its process exits, or the timeout.
func (lc *localCluster) waitReady(ctx context.Context, nd *node) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	lc.mu.Lock()
	p := nd.proc
	lc.mu.Unlock()
	if p == nil {
		return fmt.Errorf("server %d is not running", nd.index)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.clientPort))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for polls := 0; ; polls++ {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		mode, err := serverMode(qctx, addr)
		qcancel()
		switch {
		case err == nil && mode != "read-only" && nd.secureListening(ctx):
			return nil
		case err == nil && mode != "read-only":
			last = fmt.Errorf("TLS port %s not listening", nd.secureAddr())
		case err == nil:
			last = fmt.Errorf("mode %s", mode)
		default:
			last = err
		}
		if p.exited() {
			return lc.startError(nd, fmt.Errorf("server %d exited: %v", nd.index, p.err))
		}
		if polls%10 == 9 && logHasBindError(nd.logPath) {
			p.signal(syscall.SIGKILL)
			return lc.startError(nd, fmt.Errorf("server %d could not bind", nd.index))
		}
		select {
		case <-ctx.Done():
			return lc.startError(nd, fmt.Errorf("%w: server %d (%s) not serving after %v: %v (%w)", errNotServing, nd.index, addr, readyTimeout, last, context.Cause(ctx)))
		case <-tick.C:
		}
	}
}

// errNotServing marks a local server that was found and started but did
// not serve in time: a slow or overloaded machine, not a missing install.
var errNotServing = errors.New("the installed ZooKeeper started but did not serve in time (an overloaded machine?)")

// startError adds the log tail and marks port clashes.
func (lc *localCluster) startError(nd *node, err error) error {
	if logHasBindError(nd.logPath) {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return fmt.Errorf("%w; log %s ends with:\n%s", err, nd.logPath, logTail(nd.logPath, 40))
}

func logHasBindError(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	// Only look at the current run of the server.
	if i := bytes.LastIndex(b, []byte("=== zktest: starting")); i >= 0 {
		b = b[i:]
	}
	return bytes.Contains(b, []byte("Address already in use")) || bytes.Contains(b, []byte("BindException"))
}

// logTail returns the last n lines of the file at path, without Java stack
// frames, which say little here.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "at ") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logTails returns the end of every server's log.
func (lc *localCluster) logTails(n int) string {
	var b strings.Builder
	for _, nd := range lc.nodes {
		fmt.Fprintf(&b, "--- server %d (%s) ---\n%s\n", nd.index, nd.logPath, logTail(nd.logPath, n))
	}
	return b.String()
}

// ownerFile holds the pid of the process that made a cluster directory.
const ownerFile = "owner.pid"

var sweepOnce sync.Once

// sweepStale removes the directories of clusters whose owning process is
// gone: a test binary that was killed (a -timeout panic, a crash) runs no
// cleanup, and while its JVMs die with it, their directories stay.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "zktest-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if serverkit.ProcessGone(pid) {
			_ = os.RemoveAll(d)
		}
	}
}

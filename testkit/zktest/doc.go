// Package zktest provides real ZooKeeper servers to tests and demo programs.
//
// # Problem
//
// Recipes built on ZooKeeper (locks, fences, elections) are only as good as
// their behaviour under real session expiry, connection loss and leader
// changes, which a mock cannot reproduce. Tests in this module therefore never
// mock ZooKeeper: they run against real servers, and they never skip when no
// server can be had — they fail loudly with InstallHint, which says what to
// install.
//
// # One face for every test server
//
// zktest is the model of the repository's server harnesses (etcd:
// backend/etcdlock/etcdtest; PostgreSQL and PgBouncer: testkit/pgtest;
// Redis: backend/redislock/redistest), which all have this face:
//
//   - Launch(ctx, opts...) returns a server (here a Cluster) for programs
//     such as cmd/demo, cmd/nemesis and cmd/zkbench, which Close it; its
//     error wraps ErrNoServer and holds InstallHint when none can be had
//     (etcdtest and pgtest have no options: Launch(ctx), Start(tb));
//   - Start(tb, opts...) is Launch for a test: the test fails at once with
//     InstallHint when no server can be had (it never skips), and the
//     server is closed at the test's cleanup;
//   - Shared(tb) returns the same type as Start, on one server per test
//     binary that Main stops (where a harness shares one);
//   - one environment variable names an existing server to use instead,
//     <SERVER>_TEST_<what it holds>: ZK_TEST_SERVERS, ETCD_TEST_ENDPOINTS,
//     PG_TEST_DSN, REDIS_TEST_ADDR. The servers it names cannot be
//     stopped, killed or restarted, so the tests that do fail.
//
// # Where servers come from
//
// Start, Shared and Launch try these providers in order:
//
//  1. ZK_TEST_SERVERS=host:port,... names an existing ensemble. Every cluster
//     gets its own chroot on it, created at start and deleted with everything
//     under it at cleanup. The servers cannot be controlled: Stop, Kill,
//     Restart, Pause and Resume return ErrUnsupported.
//  2. A local install: java ($JAVA_HOME/bin/java or PATH) and ZooKeeper's
//     jars ($ZOOKEEPER_HOME/lib, or Debian's /usr/share/java/zookeeper.jar).
//     scripts/zk-debian.sh lays out Debian 13's ZooKeeper 3.9.3 for
//     ZOOKEEPER_HOME (ZOOKEEPER_HOME=$(scripts/zk-debian.sh) go test ...).
//     zktest writes a configuration in a temporary directory and starts one
//     JVM per server on free 127.0.0.1 ports (retrying on fresh ports when
//     another test binary took one first), with a 100 ms tick so that session
//     expiry takes well under a second, all four-letter words enabled, no
//     fsync and no admin server. Each JVM has its own process group and, on
//     Linux, dies with the test binary even if the binary crashes.
//  3. testcontainers-go runs the zookeeper:3.8 image when a Docker daemon
//     answers (standalone only; no controls), from a child process: the
//     program testkit/containers, a module of its own so that no user of the
//     root module requires testcontainers-go, which zktest builds with the
//     go command (from the test's module graph, or at the root module's
//     released version) only when it gets this far.
//
// When none works, Start and Shared fail the test with InstallHint and the
// reason each provider gave, and Launch returns an error wrapping ErrNoServer.
// Tests that use the controls (Stop, Kill, Restart, Pause, Resume) fail under
// ZK_TEST_SERVERS or a container, which cannot be controlled.
//
// WithSeqCounters starts local servers on a snapshot (written with
// ZooKeeper's own classes by seed/SeedCounters.java, which needs a JDK) whose
// directories' sequential-node counters are where a test wants them, such
// as just below their end at math.MaxInt32. The other providers cannot be
// seeded: Start fails.
//
// WithTLS makes local servers also serve TLS on a secureClientPort, with
// certificates generated for the cluster (testkit/certtest) and a client
// certificate required: SecureServers and ClientTLS give a client what it
// needs. The other providers are not tried.
//
// The local servers use ZooKeeper's Netty connection factory where Netty's
// codec jar is available, because the default NIO factory of ZooKeeper 3.8.0
// leaves a client that connects while a (re)starting standalone server loads
// its data hanging on an unanswered socket.
//
// # Guarantee
//
// Whatever a test starts is gone when it ends: Start registers Close with
// t.Cleanup (processes killed and reaped, temporary directories removed,
// chroots deleted), Shared's chroots are deleted at cleanup and the shared
// server is stopped by Main, which then fails the test binary if goroutines
// leaked (goleak).
//
// # Example
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestLeaderLoss(t *testing.T) {
//		c := zktest.Start(t, zktest.WithEnsemble(3))
//		// go-zookeeper has no chroot support: use Addrs and prefix paths with
//		// c.Chroot() (empty here, as the cluster is the test's own).
//		conn, _, err := zk.Connect(c.Addrs(), 5*time.Second)
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer conn.Close()
//		leader, err := c.Leader()
//		if err != nil {
//			t.Fatal(err)
//		}
//		if err := c.Kill(leader); err != nil {
//			t.Fatal(err)
//		}
//		// ... the client reconnects to a follower once a new leader is elected.
//	}
//
//	func TestWatch(t *testing.T) {
//		c := zktest.Shared(t) // cheap: a fresh chroot on a shared server
//		_ = c.Servers()       // ["127.0.0.1:port/zktest/TestWatch-1a2b3c4d"]
//		_ = c.Chroot()        // "/zktest/TestWatch-1a2b3c4d"
//	}
//
// Faults between one client and the servers come from a
// serverkit.FaultProxy (testkit/serverkit, which holds the free ports,
// child processes and TestMain that every harness shares):
//
//	p := serverkit.NewFaultProxy()
//	defer p.Close()
//	conn, _, err := zk.Connect(c.Addrs(), time.Second, zk.WithDialer(p.Dial))
//	p.Blackhole() // the session expires at the server after its timeout
//	p.Resume()    // the client reconnects and learns it expired
//
// A session can also be expired on demand, at once: a SessionTap in front
// of the client's dialer records the session's ID and password, and
// ExpireSession re-attaches the session from a connection of its own and
// closes it (Curator's KillSession):
//
//	tap := zktest.NewSessionTap()
//	conn, _, err := zk.Connect(c.Addrs(), time.Second, zk.WithDialer(tap.Dialer(p.Dial)))
//	id, passwd, _ := tap.Session()
//	err = zktest.ExpireSession(ctx, c.Addrs(), id, passwd)
//
// Package testkit/nemesis drives all of these at random against the recipes
// (docs/reliability.md).
package zktest

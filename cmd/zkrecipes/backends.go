package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/internal/userinfo"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// backend is the lock service --servers names.
type backend string

const (
	zkBackend    backend = "ZooKeeper"  // a host:port list, with an optional chroot
	etcdBackend  backend = "etcd"       // etcd://host:port[,host:port...][/prefix], or etcds:// (TLS)
	pgBackend    backend = "PostgreSQL" // postgres:// or postgresql://
	redisBackend backend = "Redis"      // redis://host:port[/db], or rediss:// (TLS)
)

// backendOf returns the backend named by the scheme of servers; a
// keyword/value string ("host=db dbname=app") is PostgreSQL's, a list
// without a scheme is ZooKeeper's. An unknown scheme is a usage error.
func backendOf(servers string) (backend, error) {
	s := strings.TrimSpace(servers)
	if userinfo.IsKeywordValue(s) {
		return pgBackend, nil
	}
	i := strings.Index(s, "://")
	if i < 0 {
		return zkBackend, nearScheme(s)
	}
	switch strings.ToLower(s[:i]) {
	case "etcd", "etcds":
		return etcdBackend, nil
	case "postgres", "postgresql":
		return pgBackend, nil
	case "redis", "rediss":
		return redisBackend, nil
	case "k8s":
		return k8sBackend, checkK8sServers(s)
	}
	return "", fmt.Errorf("--servers %q: unknown scheme %q: want etcd://, etcds://, postgres://, redis://, rediss://, k8s://, or a ZooKeeper host:port list without a scheme",
		redact(servers), s[:i])
}

// lowerScheme returns servers with the scheme of a URL ("POSTGRES://...")
// in lower case: schemes are case-insensitive (RFC 3986), and the clients
// the URL is handed to (pgx) take only the lower-case ones.
func lowerScheme(servers string) string {
	i := strings.Index(servers, "://")
	if i < 0 || strings.ContainsAny(servers[:i], "/@ ") {
		return servers
	}
	return strings.ToLower(servers[:i]) + servers[i:]
}

// schemes are the URL schemes of --servers, the longer of two with the
// same beginning first.
var schemes = []string{"postgresql", "postgres", "etcds", "etcd", "rediss", "redis", "k8s"}

// nearScheme returns a usage error for a server list without "://" that
// begins with a scheme and a mistyped separator ("postgresql//app@db/x",
// "etcd:/e1:2379", "k8s:/"), which would otherwise be read as ZooKeeper
// hosts; nil for anything else. The separator (the run of ':' and '/'
// after the scheme) must hold a '/' and be at least two bytes, so that a
// ZooKeeper host named like a scheme stays one ("redis:2181", "etcd/app":
// host redis, port 2181; host etcd, chroot /app). Only the scheme and the
// separator are quoted: what follows may be a password.
func nearScheme(s string) error {
	for _, sch := range schemes {
		if len(s) <= len(sch) || !strings.EqualFold(s[:len(sch)], sch) {
			continue
		}
		rest := s[len(sch):]
		sep := rest[:len(rest)-len(strings.TrimLeft(rest, ":/"))]
		if len(sep) < 2 || !strings.Contains(sep, "/") {
			return nil
		}
		meant, _ := backendOf(sch + "://")
		return fmt.Errorf("--servers begins with %q: for %s, write %q (read as it is, it would be a list of ZooKeeper hosts)",
			s[:len(sch)]+sep, meant, s[:len(sch)]+"://")
	}
	return nil
}

// zkOnlyFlags are the flags of lock that mean nothing for the other
// backends, with the reason given when one of them is used with another
// backend.
var zkOnlyFlags = []struct{ name, why string }{
	{"rw", "read-write locks are ZooKeeper's only"},
	{"semaphore", "semaphores are ZooKeeper's only"},
	{"session-timeout", "it is a ZooKeeper session's; the lease's bound is --ttl"},
	{"tolerate-suspension", "it is a ZooKeeper session's suspension policy"},
	{"auth-file", "it holds ZooKeeper's digest credentials; the others take theirs from the URL or the driver's environment"},
	{"acl", "it is the ACL of ZooKeeper's nodes"},
}

// checkBackendFlags refuses, as a usage error naming the flag and the
// backend, a flag given on the command line that means nothing for b.
func checkBackendFlags(fs *flag.FlagSet, b backend) error {
	if err := checkK8sFlags(fs, b); err != nil {
		return err
	}
	if b == zkBackend {
		if flagSet(fs, "ttl") {
			return errors.New("--ttl means nothing for ZooKeeper: it is the lease's bound on etcd, PostgreSQL, Redis and Kubernetes; ZooKeeper's is --session-timeout")
		}
		return nil
	}
	for _, f := range zkOnlyFlags {
		if !flagSet(fs, f.name) {
			continue
		}
		why := f.why
		if f.name == "session-timeout" && fs.Lookup("ttl") == nil {
			// register, members, watch: no --ttl to point at.
			why = fmt.Sprintf("it is a ZooKeeper session's; this command's lease lives %v (the lock command's --ttl default)", defaultTTL)
		}
		return fmt.Errorf("--%s means nothing for %s: %s", f.name, b, why)
	}
	return nil
}

// zkOnly refuses, as a usage error, a command that works with ZooKeeper
// only when --servers names another backend.
func zkOnly(stderr io.Writer, fs *flag.FlagSet, c *common) int {
	if c.backend == zkBackend {
		return -1
	}
	cmd := strings.TrimPrefix(fs.Name(), "zkrecipes ")
	also := "lock takes etcd://, postgres://, redis:// and k8s:// too"
	if cmd == "elect" {
		also = "elect --observe PATH (no --id, --once, --grace or command) follows the leader on every backend"
	}
	return usageError(stderr, fs, "%s works with ZooKeeper only, and --servers names %s (%s); %s", cmd, c.backend, redact(c.servers), also)
}

// zkOnlyArgs is zkOnly before args are parsed: --servers (its last value
// before "--", else $ZK_SERVERS) naming another backend is refused first,
// before a flag of lock's (--kubeconfig, --ttl) is called unknown or a
// lock name is judged as a ZooKeeper path. With -h or --help it lets the
// help be printed.
func zkOnlyArgs(stderr io.Writer, fs *flag.FlagSet, args []string) int {
	servers := os.Getenv(envServers)
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "h" || name == "help":
			return -1
		case name == "servers" && inline:
			servers = val
		case name == "servers" && i+1 < len(args):
			servers = args[i+1]
		}
	}
	b, _ := backendOf(servers)
	if b == "" || b == zkBackend {
		return -1 // check judges it after the flags
	}
	return zkOnly(stderr, fs, &common{servers: servers, backend: b})
}

// lockService is an open session of the lock service lock uses.
type lockService struct {
	backend backend
	// newLock returns the lock named path.
	newLock func(path string) (recipe.Lock, error)
	// bound is how long a release may take: the session timeout or TTL.
	bound time.Duration
	// session names the session that owns a grant made just before
	// ("0x…"; ZooKeeper only, "" otherwise).
	session func() string
	close   func()
	// zk is the ZooKeeper session (nil for the other backends).
	zk *zookeeper.Session
}

// open connects to the lock service of --servers; on failure it logs and
// returns the exit status (-1 on success). Every backend's session takes
// the metrics (--metrics-addr); ZooKeeper's the suspension policy too; the
// other backends' lease is --ttl.
func (f *lockFlags) open(ctx context.Context, log *slog.Logger, met *metricsServer, data []byte) (*lockService, int) {
	if f.backend == zkBackend {
		s, code := f.connect(ctx, log, met.option()...)
		if code >= 0 {
			return nil, code
		}
		return &lockService{
			backend: zkBackend,
			newLock: func(path string) (recipe.Lock, error) { return f.zkLock(s, path, data) },
			bound:   s.SessionTimeout(),
			session: func() string { return fmt.Sprintf("0x%x", s.ID()) },
			close:   func() { s.Close() },
			zk:      s,
		}, -1
	}
	ls := &lockService{backend: f.backend, session: func() string { return "" }}
	cctx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	defer cancel()
	var err error
	switch f.backend {
	case etcdBackend:
		var s *etcdlock.Session
		s, err = f.connectEtcd(cctx, log, f.ttl, etcdlock.WithMetrics(met.metrics()))
		if err == nil {
			ls.newLock = func(path string) (recipe.Lock, error) {
				return etcdlock.New(s, path, etcdlock.WithLockDelay(f.lockDelay))
			}
			ls.bound, ls.close = s.TTL(), func() { s.Close() }
		}
	case pgBackend:
		var s *pglock.Session
		s, err = pglock.Connect(cctx, f.servers, f.tls.postgres(pglock.WithTTL(f.ttl), pglock.WithLogger(log), pglock.WithMetrics(met.metrics()))...)
		if err == nil {
			ls.newLock = func(path string) (recipe.Lock, error) { return pglock.New(s, path, pglock.WithLockDelay(f.lockDelay)) }
			ls.bound, ls.close = s.TTL(), func() { s.Close() }
		}
	case redisBackend:
		var s *redislock.Session
		s, err = redislock.Connect(cctx, f.servers, f.tls.redis(redislock.WithTTL(f.ttl), redislock.WithLogger(log), redislock.WithMetrics(met.metrics()))...)
		if err == nil {
			ls.newLock = func(path string) (recipe.Lock, error) {
				return redislock.New(s, path, redislock.WithLockDelay(f.lockDelay))
			}
			ls.bound, ls.close = s.TTL(), func() { s.Close() }
		}
	case k8sBackend:
		var k *lockService
		if k, err = f.openK8s(cctx, log, met.metrics()); err == nil {
			ls = k
		}
	}
	if err != nil {
		return nil, connectStatus(log, f.backend, f.servers, err)
	}
	return ls, -1
}

// checkLockName returns the error the backend's New returns for the lock
// name path, without a session.
func checkLockName(b backend, path string) error {
	switch b {
	case etcdBackend:
		return etcdlock.CheckName(path)
	case pgBackend:
		return pglock.CheckName(path)
	case redisBackend:
		return redislock.CheckName(path)
	case k8sBackend:
		return k8slease.CheckName(path, k8slease.DefaultNamespace)
	}
	return nil
}

// zkLock returns lock's ZooKeeper lock at path: a mutex, one side of a
// read-write lock (--rw) or a semaphore's lease (--semaphore, its limit
// stored with the directory: another N is refused), with data in its node.
func (f *lockFlags) zkLock(s *zookeeper.Session, path string, data []byte) (recipe.Lock, error) {
	d := mutex.WithData(data)
	switch {
	case f.rw != "":
		rw, err := mutex.NewRW(s, path, d)
		if err != nil {
			return nil, err
		}
		if f.rw == "read" {
			return rw.ReadLock(), nil
		}
		return rw.WriteLock(), nil
	case f.semaphore > 0:
		return mutex.NewSemaphore(s, path, f.semaphore, d, mutex.StoredLimit())
	}
	return mutex.New(s, path, d, mutex.WithLockDelay(f.lockDelay))
}

// connectStatus logs why connecting to b failed, and returns the exit
// status: 64 for a URL or option the backend refuses and for a server that
// cannot hold locks (a pooler, a Redis replica), 69 when the server cannot
// be reached, 70 otherwise (e.g. a refused password).
func connectStatus(log *slog.Logger, b backend, servers string, err error) int {
	if status, ok := wrongServerStatus(log, b, servers, err); ok {
		return status
	}
	servers = redact(servers)
	switch {
	case errors.Is(err, errKubeconfig):
		log.Error("no Kubernetes client configuration: give --kubeconfig, set KUBECONFIG, or run in a Pod with a service account", "err", err)
		return exitUsage
	case tlsRejected(err):
		return tlsStatus(log, b, servers, err)
	case errors.Is(err, etcdlock.ErrBadURL), errors.Is(err, pglock.ErrBadURL), errors.Is(err, redislock.ErrBadURL),
		errors.Is(err, recipe.ErrBadOption), errors.Is(err, recipe.ErrInvalidPath):
		log.Error("bad --servers or option", "servers", servers, "err", err)
		return exitUsage
	case errors.Is(err, pglock.ErrPooler), errors.Is(err, redislock.ErrNotPrimary):
		log.Error("the server cannot hold locks: point --servers at the primary server itself", "servers", servers, "err", err)
		return exitUsage
	case errors.Is(err, pglock.ErrOldServer):
		log.Error("the server is older than PostgreSQL 14, which zkrecipes lock needs", "servers", servers, "err", err)
		return exitSoftware
	case errors.Is(err, recipe.ErrNoPermission):
		// The server answered and refused: a password, or a client
		// certificate that TLS 1.3 refuses with a reset (which is
		// unreachable too). No retry mends it.
		log.Error("cannot connect to "+string(b), "servers", servers, "err", err)
		return exitSoftware
	case unavailable(err):
		log.Error("cannot connect to "+string(b), "servers", servers, "err", err)
		return exitUnavailable
	}
	log.Error("cannot connect to "+string(b), "servers", servers, "err", err)
	return exitSoftware
}

// unavailable reports whether err says that the lock service could not be
// reached or dropped the connection (rather than refusing a request): a
// lost or unreachable session, a network error or timeout, a connection
// that ended, a PostgreSQL server shutting down or starting up.
func unavailable(err error) bool {
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, recipe.ErrSessionLost), errors.Is(err, recipe.ErrUnreachable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		// Class 08: connection exception; 57P01-57P03: admin shutdown,
		// crash shutdown, cannot connect now.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	return false
}

// redact hides the passwords of --servers ("user:xxxxx@", "?password=xxxxx",
// "password=xxxxx"), for logs and messages. It is the backends' own
// redaction (internal/userinfo), which also covers URLs that don't parse.
func redact(servers string) string { return userinfo.Redact(servers) }

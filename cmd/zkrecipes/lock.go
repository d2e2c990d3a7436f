package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const lockUsage = `Usage: zkrecipes lock [flags] PATH -- CMD [ARGS...]

Acquire the lock at PATH (a mutex; with ZooKeeper, --rw read|write for one
side of a read-write lock and --semaphore N for one of N leases), run CMD
while holding it, release it when CMD exits, and exit with CMD's status.

The lock service is the one --servers (or ZK_SERVERS) names:
  host:port,host:port[/chroot]           ZooKeeper (no scheme)
  etcd://host:2379[,host:2379][/prefix]  etcd: keys under prefix (default /zkrecipes)
  postgres://user@host:5432/db?...       PostgreSQL advisory locks (also postgresql://,
                                         or "host=... dbname=..." keyword/value)
  redis://[:password@]host:6379[/db]     a single Redis primary (rediss:// for TLS)
  k8s://                                 a Kubernetes Lease, on the cluster of --kubeconfig
                                         (default $KUBECONFIG, ~/.kube/config, then the
                                         Pod's service account)
PATH is the lock's name: a ZooKeeper path such as /cron/nightly, which the
other backends take as it is, except Kubernetes: "namespace/name" of the
Lease (or "name" in namespace default). Their lease lasts --ttl without
news from the holder; ZooKeeper's is the session (--session-timeout).

CMD runs in a process group of its own, with ZKRECIPES_TOKEN (the fencing
token: pass it to the resource you write to), ZKRECIPES_PATH and, with
ZooKeeper, ZKRECIPES_SESSION_ID in its environment, but not ZK_SERVERS,
ZK_AUTH and, under a PostgreSQL lock (whose credentials they are),
PGPASSWORD and PGSSLPASSWORD, unless --pass-env names them (the INFO
log names those withheld).
When ownership is lost (session expired or connection suspended per
policy, lease not renewed in time, lock node or key deleted, connection to
PostgreSQL ended) CMD's group gets SIGTERM, then SIGKILL after --grace,
and zkrecipes exits 79. SIGINT,
SIGTERM and SIGHUP sent to zkrecipes are forwarded to CMD's group (SIGKILL
after --grace, or at once on a signal while CMD is being stopped); the
lock is then released and CMD's status returned. With ZooKeeper
credentials (--auth-file or ZK_AUTH) the nodes are created with --acl.

Examples:
  # cron singleton: run on whichever machine gets the lock, exit 75 on the others
  zkrecipes lock --log-level warn --wait 0 /cron/nightly -- ./nightly.sh
  # wait up to 10 minutes for the lock, on a chrooted ensemble
  zkrecipes lock --servers zk1:2181,zk2:2181/myapp --wait 10m /locks/migrate -- ./migrate.sh
  # at most 3 concurrent backups
  zkrecipes lock --semaphore 3 /locks/backup -- sh -c 'backup --fence "$ZKRECIPES_TOKEN"'
  # the same cron singleton on PostgreSQL (password from ~/.pgpass or PGPASSWORD)
  zkrecipes lock --servers postgres://cron@db1/app --log-level warn --wait 0 /cron/nightly -- ./nightly.sh
  # on etcd, with a 20 s lease
  zkrecipes lock --servers etcd://e1:2379,e2:2379/myapp --ttl 20s /locks/migrate -- ./migrate.sh
  # on Kubernetes, the Lease "migrate" of namespace "myapp", with a 15 s lease
  zkrecipes lock --servers k8s:// --kubeconfig ~/.kube/config --ttl 15s myapp/migrate -- ./migrate.sh

Exit statuses: CMD's status; 64 usage (a flag that means nothing for the
backend too); 69 server unreachable; 70 other error; 75 held elsewhere
(--wait passed); 79 ownership lost, CMD stopped; 130/143 interrupted while
waiting for the lock.
`

// defaultTTL is --ttl's default: DefaultTTL of etcdlock, pglock and
// redislock alike.
const defaultTTL = 10 * time.Second

// lockFlags are lock's own flags.
type lockFlags struct {
	common
	wait       time.Duration
	grace      time.Duration
	rw         string
	semaphore  int
	ttl        time.Duration
	kubeconfig string
	era        int
	eraSet     bool          // --era given (0 included: the range is then checked)
	lockDelay  time.Duration // --lock-delay
}

func runLock(args []string, stdout, stderr io.Writer) int {
	var f lockFlags
	fs := newFlagSet("lock", lockUsage, stdout, stderr)
	f.register(fs, true, "info")
	fs.Lookup("servers").Usage += "; or etcd://host:port[,host:port][/prefix], postgres://user@host:port/db?..., redis://host:port[/db], k8s://"
	f.registerKubeconfig(fs)
	f.wait = -1
	fs.Var((*waitFlag)(&f.wait), "wait", "how long to wait for the lock: a `duration`, 0 to try once, or forever")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM, how long CMD gets to exit before SIGKILL")
	fs.StringVar(&f.rw, "rw", "", "ZooKeeper: take one side of a read-write lock: read or write")
	fs.Var((*decimalFlag)(&f.semaphore), "semaphore", "ZooKeeper: take one of `N` leases of a counting semaphore; the first user of PATH stores N with it, and another N is refused (exit 64)")
	fs.Var((*decimalFlag)(&f.era), "era", "every backend: move the token into era `N`'s range (N·2^48 + the backend's token), for a lock moved to another backend (docs/backends.md#switching-backends)")
	fs.DurationVar(&f.lockDelay, "lock-delay", 0, "etcd, PostgreSQL, Redis, ZooKeeper (not with --rw or --semaphore): after the previous holder ended without releasing (killed, cut off, expired), wait `D` before taking the lock, so that its requests still in flight land first (Chubby's lock-delay); 0: none")
	fs.DurationVar(&f.ttl, "ttl", defaultTTL, "etcd, PostgreSQL, Redis, Kubernetes: the lease's time to live, after which the server frees the lock of a holder it has not heard from (the holder gives it up sooner; Kubernetes: the Lease's leaseDurationSeconds, whole seconds)")
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) != 1:
		return usageError(stderr, fs, "want exactly one PATH before --, got %d arguments %q", len(pos), pos)
	case len(cmd) == 0:
		return usageError(stderr, fs, "no command: put it after --, as in: zkrecipes lock %s -- CMD [ARGS...]", pos[0])
	case f.rw != "" && f.rw != "read" && f.rw != "write":
		return usageError(stderr, fs, "--rw %q: want read or write", f.rw)
	case f.semaphore < 0 || (f.semaphore == 0 && flagSet(fs, "semaphore")):
		return usageError(stderr, fs, "--semaphore %d: want a number of leases >= 1", f.semaphore)
	case f.semaphore > 0 && f.rw != "":
		return usageError(stderr, fs, "--rw and --semaphore exclude each other")
	case f.grace < 0:
		return usageError(stderr, fs, "--grace %v must not be negative", f.grace)
	case f.ttl <= 0:
		return usageError(stderr, fs, "--ttl %v must be positive", f.ttl)
	case f.era > int(fence.MaxEra):
		return usageError(stderr, fs, "--era %d: want an era from 0 to %d", f.era, fence.MaxEra)
	case f.lockDelay < 0 || f.lockDelay > recipe.MaxLockDelay:
		return usageError(stderr, fs, "--lock-delay %v: want 0 (none) up to %v", f.lockDelay, recipe.MaxLockDelay)
	case f.lockDelay > 0 && (f.rw != "" || f.semaphore > 0):
		return usageError(stderr, fs, "--lock-delay is for an exclusive lock: not with --rw or --semaphore (several holders have no one previous holder)")
	}
	f.eraSet = flagSet(fs, "era")
	if err := f.check(); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if err := checkBackendFlags(fs, f.backend); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if f.backend == zkBackend {
		if code := checkPath(stderr, fs, pos[0]); code >= 0 {
			return code
		}
	}
	return lockMain(&f, pos[0], cmd, stderr)
}

func lockMain(f *lockFlags, path string, argv []string, stderr io.Writer) int {
	log := f.logger(stderr).With("path", shortpath.Of(path))
	if f.backend != zkBackend {
		log = log.With("backend", string(f.backend))
		// Before connecting, as ZooKeeper paths are: a bad name is a usage
		// error (64) even when the server can't be reached.
		if err := checkLockName(f.backend, path); err != nil {
			log.Error("cannot use the lock name", "err", err)
			return exitUsage
		}
	}
	host, _ := os.Hostname()
	data := []byte(fmt.Sprintf("%s:%d", host, os.Getpid()))
	var ls *lockService
	sv, code := f.supervise(log, func(ctx context.Context, met *metricsServer) (func(), int) {
		var code int
		if ls, code = f.open(ctx, log, met, data); code >= 0 {
			return nil, code
		}
		return ls.close, -1
	})
	if code >= 0 {
		return code
	}
	defer sv.close()
	ctx, sigs, stopWatch := sv.ctx, sv.sigs, sv.stopWatch

	lk, err := ls.newLock(path)
	if err != nil {
		return failStatus(log, "lock", err)
	}
	if f.eraSet {
		lk = recipe.InEra(lk, fence.Era(f.era))
	}

	start := time.Now()
	log.Debug("acquiring the lock", "wait", (*waitFlag)(&f.wait).String())
	var lease recipe.Lease
	switch {
	case f.wait == 0:
		lease, err = lk.TryAcquire(ctx)
	case f.wait > 0:
		wctx, wcancel := context.WithTimeout(ctx, f.wait)
		lease, err = acquireAgain(wctx, lk, log)
		wcancel()
	default:
		lease, err = acquireAgain(ctx, lk, log)
	}
	stopWatch()
	if err != nil {
		switch {
		case sv.got != nil:
			log.Info("interrupted while waiting for the lock", "signal", sv.got)
			return signalStatus(sv.got)
		case errors.Is(err, recipe.ErrLocked), errors.Is(err, context.DeadlineExceeded):
			// INFO, not WARN: on a cron singleton every machine but one
			// is refused every night, a routine outcome (exit 75 says it);
			// with --log-level warn (the crontab lines of README.md and
			// docs/cli.md) cron mails nothing for it (issue 24).
			log.Info("held elsewhere", append(holderAttrs(lk), "waited", time.Since(start).Round(time.Millisecond), "err", err)...)
			return exitHeld
		}
		return failStatus(log, "lock", err)
	}
	release := func(killed bool) {
		if killed && f.lockDelay > 0 {
			holdForDelay(log, lease, f.lockDelay)
		}
		releaseLease(lease, ls.bound, log)
	}
	if sv.got != nil { // the signal came with the grant: don't start the command
		log.Info("interrupted as the lock was granted", "signal", sv.got)
		release(false)
		return signalStatus(sv.got)
	}
	env, granted := grantEnv(f, ls, lease, path)
	log.Info("lock acquired", append(granted, "waited", time.Since(start).Round(time.Millisecond))...)
	return runUnder(log, lease, argv, env, sigs, f.grace, "ownership", release)
}

// grantEnv returns the command's environment for the grant lease of path,
// and the grant's attributes for the log: its token, its session
// (ZooKeeper) and the lock-delay it served, if any.
func grantEnv(f *lockFlags, ls *lockService, lease recipe.Lease, path string) (env []string, attrs []any) {
	env = childEnv(os.Environ(), f.sec.passEnv, envToken+"="+lease.Token().String(), envPath+"="+path)
	attrs = []any{"token", lease.Token()}
	if id := ls.session(); id != "" {
		env = append(env, envSessionID+"="+id)
		attrs = append(attrs, "session", id)
	}
	if d := recipe.LockDelayServed(lease); d > 0 {
		attrs = append(attrs, "lock_delay", d.Round(time.Millisecond))
	}
	return env, attrs
}

// runUnder runs argv (with env) while lease lasts, supervised (see
// child.supervise), then gives the lease up with giveUp, unless ownership
// (what: "ownership", "leadership") was lost. It returns the exit status.
func runUnder(log *slog.Logger, lease recipe.Lease, argv, env []string, sigs <-chan os.Signal, grace time.Duration,
	what string, giveUp func(killed bool)) int {
	c, err := startChild(log, argv, env)
	if err != nil {
		log.Error("cannot start the command", "argv", argv, "err", err)
		giveUp(false)
		return startStatus(err)
	}
	out, sig := c.supervise(lease.Context(), sigs, nil, nil, grace)
	switch out {
	case lost:
		log.Error(what+" lost; the command was stopped", "token", lease.Token(),
			"cause", context.Cause(lease.Context()), "command", c.describe())
		return exitLost
	case interrupted:
		log.Info("interrupted; the command has exited", "signal", sig, "command", c.describe())
	default:
		log.Info("the command exited", "command", c.describe())
	}
	giveUp(c.signaled())
	return c.status()
}

// acquireAgain is lk.Acquire, queueing again when the session or the
// connection is lost while waiting (the place in the queue went with it;
// the backend opens a new session or connection), after a pause growing
// from 100 ms to 5 s, until ctx ends.
func acquireAgain(ctx context.Context, lk recipe.Lock, log *slog.Logger) (recipe.Lease, error) {
	pause := 100 * time.Millisecond
	for {
		l, err := lk.Acquire(ctx)
		if err == nil || !unavailable(err) || ctx.Err() != nil {
			return l, err
		}
		log.Warn("the session or connection was lost while waiting for the lock; queueing again", "err", err, "after", pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// holderAttrs describes the current holder for the log (nothing if it
// cannot be read within a second).
func holderAttrs(lk recipe.Lock) []any {
	if u, ok := lk.(interface{ Unwrap() recipe.Lock }); ok {
		lk = u.Unwrap() // --era's wrapper
	}
	p, ok := lk.(interface {
		Participants(context.Context) ([]zookeeper.Participant, error)
	})
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps, err := p.Participants(ctx)
	if err != nil || len(ps) == 0 {
		return nil
	}
	return []any{"holder", string(ps[0].Data), "holder_token", ps[0].Token,
		"holder_session", fmt.Sprintf("0x%x", ps[0].SessionID)}
}

// releaseLease releases the lease, bounded by bound (the session timeout
// or TTL: a release that cannot be confirmed goes with the session's
// Close).
func releaseLease(l recipe.Lease, bound time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		log.Warn("release failed; closing the session frees the lock", "err", err)
		return
	}
	log.Info("lock released", "token", l.Token())
}

// holdForDelay keeps the lease d longer (or until it ends) before it is
// released: the command ended by a signal (a crash, an OOM kill, a signal
// forwarded to it), so requests it sent may still be in flight, and a
// Release would be a clean end that lets the next holder in at once. This
// is the lock-delay the servers serve after an unclean end, served here.
func holdForDelay(log *slog.Logger, l recipe.Lease, d time.Duration) {
	log.Info("the command ended by a signal: keeping the lock for the lock-delay before releasing it, so that its requests in flight land first",
		"lock_delay", d, "token", l.Token())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.Context().Done():
	}
}

// watchSignals calls on for the first signal from sigs until the returned
// stop is called (stop waits for the watcher to end; a signal consumed by
// it is reported through on only).
func watchSignals(sigs <-chan os.Signal, on func(os.Signal)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			on(sig)
		case <-quit:
		}
	}()
	return func() {
		select {
		case <-quit:
		default:
			close(quit)
		}
		<-done
	}
}

// interruptible returns a context that SIGINT, SIGTERM or SIGHUP cancels
// (a read-only command's: startReadOnly), and its stop, which also stops
// the signals' delivery.
func interruptible() (context.Context, func()) {
	sigs := notifySignals()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// startReadOnly is the start of a read-only command (inspect, members,
// watch, elect --observe): its interruptible context and its metrics
// endpoint on addr (startMetrics). end closes the endpoint, then stops the
// signals; code is startMetrics's exit code when it failed (-1 otherwise),
// and then nothing is left to end.
func startReadOnly(addr string, log *slog.Logger) (_ context.Context, _ *metricsServer, end func(), code int) {
	ctx, stop := interruptible()
	met, code := startMetrics(addr, log)
	if code >= 0 {
		stop()
		return nil, nil, nil, code
	}
	return ctx, met, func() { met.close(); stop() }, -1
}

// notifySignals relays SIGINT, SIGTERM and SIGHUP, except those zkrecipes
// was started with ignored (nohup, or a background job of a script): those
// stay ignored, for zkrecipes and for the command.
func notifySignals() chan os.Signal {
	ch := make(chan os.Signal, 2)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			signal.Notify(ch, sig)
		}
	}
	return ch
}

// signalStatus is the status a shell reports for a process ended by sig.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGTERM)
}

// waitFlag is --wait: a duration, or "forever" (stored as -1).
type waitFlag time.Duration

func (w *waitFlag) String() string {
	if *w < 0 {
		return "forever"
	}
	return time.Duration(*w).String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 0, 30s or 10m, or forever")
	}
	*w = waitFlag(d)
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

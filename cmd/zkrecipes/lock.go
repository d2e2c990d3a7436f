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
	"strconv"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const lockUsage = `Usage: zkrecipes lock [flags] PATH -- CMD [ARGS...]

Acquire the lock at PATH (a mutex; --rw read|write for one side of a
read-write lock; --semaphore N for one of N leases), run CMD while holding
it, release it when CMD exits, and exit with CMD's status.

CMD runs in a process group of its own, with ZKRECIPES_TOKEN (the fencing
token: pass it to the resource you write to), ZKRECIPES_PATH and
ZKRECIPES_SESSION_ID in its environment. When ownership is lost (session
expired, connection suspended per policy, lock node deleted) CMD's group
gets SIGTERM, then SIGKILL after --grace, and zkrecipes exits 79. SIGINT,
SIGTERM and SIGHUP sent to zkrecipes are forwarded to CMD's group (SIGKILL
after --grace or on a second signal); the lock is then released and CMD's
status returned.

Examples:
  # cron singleton: run on whichever machine gets the lock, exit 75 on the others
  zkrecipes lock --wait 0 /cron/nightly -- ./nightly.sh
  # wait up to 10 minutes for the lock, on a chrooted ensemble
  zkrecipes lock --servers zk1:2181,zk2:2181/myapp --wait 10m /locks/migrate -- ./migrate.sh
  # at most 3 concurrent backups
  zkrecipes lock --semaphore 3 /locks/backup -- sh -c 'backup --fence "$ZKRECIPES_TOKEN"'

Exit statuses: CMD's status; 64 usage; 69 ZooKeeper unreachable; 70 other
error; 75 held elsewhere (--wait passed); 79 ownership lost, CMD stopped;
130/143 interrupted while waiting for the lock.
`

// lockFlags are lock's own flags.
type lockFlags struct {
	common
	wait      time.Duration
	grace     time.Duration
	rw        string
	semaphore int
}

func runLock(args []string, stdout, stderr io.Writer) int {
	var f lockFlags
	fs := newFlagSet("lock", lockUsage, stdout, stderr)
	f.register(fs, true, "info")
	f.wait = -1
	fs.Var((*waitFlag)(&f.wait), "wait", "how long to wait for the lock: a `duration`, 0 to try once, or forever")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM, how long CMD gets to exit before SIGKILL")
	fs.StringVar(&f.rw, "rw", "", "take one side of a read-write lock: read or write")
	fs.IntVar(&f.semaphore, "semaphore", 0, "take one of `N` leases of a counting semaphore (every user of PATH must give the same N)")
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
	}
	if code := checkPath(stderr, fs, pos[0]); code >= 0 {
		return code
	}
	if err := f.check(); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	return lockMain(&f, pos[0], cmd, stderr)
}

func lockMain(f *lockFlags, path string, argv []string, stderr io.Writer) int {
	log := f.logger(stderr).With("path", path)
	sv, code := f.supervise(log)
	if code >= 0 {
		return code
	}
	defer sv.close()
	ctx, s, sigs, stopWatch := sv.ctx, sv.s, sv.sigs, sv.stopWatch

	host, _ := os.Hostname()
	data := mutex.WithData([]byte(fmt.Sprintf("%s:%d", host, os.Getpid())))
	var lk recipe.Lock
	var err error
	switch {
	case f.rw != "":
		var rw *mutex.RWMutex
		rw, err = mutex.NewRW(s, path, data)
		if err == nil {
			lk = rw.WriteLock()
			if f.rw == "read" {
				lk = rw.ReadLock()
			}
		}
	case f.semaphore > 0:
		lk, err = mutex.NewSemaphore(s, path, f.semaphore, data)
	default:
		lk, err = mutex.New(s, path, data)
	}
	if err != nil {
		return failStatus(log, "lock", err)
	}

	start := time.Now()
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
			// WARN: with --log-level warn (docs/cli.md's crontab line) a
			// refusal is the one line an operator finds in cron's mail.
			log.Warn("held elsewhere", append(holderAttrs(lk), "waited", time.Since(start).Round(time.Millisecond), "err", err)...)
			return exitHeld
		}
		return failStatus(log, "lock", err)
	}
	if sv.got != nil { // the signal came with the grant: don't start the command
		log.Info("interrupted as the lock was granted", "signal", sv.got)
		releaseLease(lease, s, log)
		return signalStatus(sv.got)
	}
	log.Info("lock acquired", "token", lease.Token(), "session", fmt.Sprintf("0x%x", s.ID()),
		"waited", time.Since(start).Round(time.Millisecond))

	env := []string{envToken + "=" + lease.Token().String(), envPath + "=" + path,
		envSessionID + "=0x" + strconv.FormatInt(s.ID(), 16)}
	return runUnder(log, lease, argv, env, sigs, f.grace, "ownership", func() { releaseLease(lease, s, log) })
}

// runUnder runs argv (with env) while lease lasts, supervised (see
// child.supervise), then gives the lease up with giveUp, unless ownership
// (what: "ownership", "leadership") was lost. It returns the exit status.
func runUnder(log *slog.Logger, lease recipe.Lease, argv, env []string, sigs <-chan os.Signal, grace time.Duration,
	what string, giveUp func()) int {
	c, err := startChild(log, argv, env)
	if err != nil {
		log.Error("cannot start the command", "argv", argv, "err", err)
		giveUp()
		return startStatus(err)
	}
	out, sig := c.supervise(lease.Context(), sigs, grace)
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
	giveUp()
	return c.status()
}

// acquireAgain is lk.Acquire, queueing again when the session is lost
// while waiting (the Session opens a new one; the old place in the queue
// went with the old session), until ctx ends.
func acquireAgain(ctx context.Context, lk recipe.Lock, log *slog.Logger) (recipe.Lease, error) {
	for {
		l, err := lk.Acquire(ctx)
		if err == nil || !errors.Is(err, recipe.ErrSessionLost) || ctx.Err() != nil {
			return l, err
		}
		log.Warn("the session was lost while waiting for the lock; queueing again", "err", err)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// holderAttrs describes the current holder for the log (nothing if it
// cannot be read within a second).
func holderAttrs(lk recipe.Lock) []any {
	p, ok := lk.(interface {
		Participants(context.Context) ([]recipe.Participant, error)
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

// releaseLease releases the lease, bounded by the session timeout (a
// delete that cannot be confirmed goes with the session's Close).
func releaseLease(l recipe.Lease, s *recipe.Session, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), s.SessionTimeout())
	defer cancel()
	if err := l.Release(ctx); err != nil {
		log.Warn("release failed; closing the session removes the lock node", "err", err)
		return
	}
	log.Info("lock released", "token", l.Token())
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

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const electUsage = `Usage: zkrecipes elect [flags] PATH --id ID -- CMD [ARGS...]

Campaign in the election at PATH with the value ID, run CMD while leader,
stop it when leadership is lost (SIGTERM, then SIGKILL after --grace), and
campaign again, until zkrecipes gets SIGINT, SIGTERM or SIGHUP (forwarded to
CMD, then zkrecipes exits 128+signal). When CMD exits by itself, leadership
is given up and the campaign starts again after a backoff (growing while
CMD fails). With --once zkrecipes exits instead: with CMD's status, or 79 if
leadership was lost.

Campaigning works with ZooKeeper only. elect --observe PATH (any backend:
also with lock's etcd://, postgres://, redis:// or k8s:// servers) only
follows the leader: it prints who leads (the candidate's --id on ZooKeeper,
the holder's published ID elsewhere), with its token and since when, and
every change, until SIGINT or SIGTERM (exit 0); --json prints one JSON line
per state, as inspect --json does on the other backends.

CMD runs in a process group of its own, with ZKRECIPES_TOKEN (the
leadership's fencing token), ZKRECIPES_PATH, ZKRECIPES_SESSION_ID and
ZKRECIPES_ID in its environment, but not ZK_SERVERS and ZK_AUTH (unless
--pass-env names them). A signal while CMD is being stopped after a lost
leadership sends it SIGKILL at once.

Examples:
  # one scheduler in the fleet; another machine takes over within the session timeout
  zkrecipes elect /elections/scheduler --id "$(hostname)" -- ./scheduler
  # lead once, e.g. from a systemd unit that restarts zkrecipes itself
  zkrecipes elect --once /elections/compactor --id "$(hostname)" -- ./compact
  # who leads, and every change
  zkrecipes elect --observe /elections/scheduler

Exit statuses: with --once CMD's status or 79 (leadership lost, CMD
stopped); 64 usage; 69 ZooKeeper unreachable; 70 other error; 130/143
interrupted.
`

type electFlags struct {
	common
	id    string
	once  bool
	grace time.Duration
}

func runElect(args []string, stdout, stderr io.Writer) int {
	var f electFlags
	fs := newFlagSet("elect", electUsage, stdout, stderr)
	f.register(fs, true, "info")
	fs.StringVar(&f.id, "id", "", "this candidate's value, shown by inspect and in ZKRECIPES_ID (default host:pid)")
	fs.BoolVar(&f.once, "once", false, "exit after the first leadership instead of campaigning again")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM, how long CMD gets to exit before SIGKILL")
	observe := fs.Bool("observe", false, "only follow the leader (any backend): print it and every change, until SIGINT or SIGTERM")
	if observeArgs(args) {
		return runHolder("elect", electUsage, args, true, stdout, stderr)
	}
	if code := zkOnlyArgs(stderr, fs, args); code >= 0 {
		return code
	}
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case *observe:
		return usageError(stderr, fs, "--observe only reads: it takes no --id, --once, --grace or command")
	case len(pos) != 1:
		return usageError(stderr, fs, "want exactly one PATH before --, got %d arguments %q", len(pos), pos)
	case len(cmd) == 0:
		return usageError(stderr, fs, "no command: put it after --, as in: zkrecipes elect %s --id ID -- CMD [ARGS...]", pos[0])
	case f.id == "" && flagSet(fs, "id"):
		return usageError(stderr, fs, "--id must not be empty")
	case len(f.id) > zookeeper.MaxNodeData:
		return usageError(stderr, fs, "--id is %d bytes long; at most %d", len(f.id), zookeeper.MaxNodeData)
	case f.grace < 0:
		return usageError(stderr, fs, "--grace %v must not be negative", f.grace)
	}
	if code := checkPath(stderr, fs, pos[0]); code >= 0 {
		return code
	}
	if err := f.check(); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if code := zkOnly(stderr, fs, &f.common); code >= 0 {
		return code
	}
	if f.id == "" {
		host, _ := os.Hostname()
		f.id = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	return electMain(&f, pos[0], cmd, stderr)
}

func electMain(f *electFlags, path string, argv []string, stderr io.Writer) int {
	log := f.logger(stderr).With("path", shortpath.Of(path), "id", f.id)
	var s *zookeeper.Session
	sv, code := f.supervise(log, func(ctx context.Context, met *metricsServer) (func(), int) {
		var code int
		if s, code = f.connect(ctx, log, met.option()...); code >= 0 {
			return nil, code
		}
		return func() { s.Close() }, -1
	})
	if code >= 0 {
		return code
	}
	defer sv.close()
	ctx, sigs, stopWatch := sv.ctx, sv.sigs, sv.stopWatch
	e, err := election.New(s, path, election.WithLogger(log))
	if err != nil {
		return failStatus(log, "leadership", err)
	}
	env := func(token fence.Token) []string {
		return childEnv(os.Environ(), f.sec.passEnv, envToken+"="+token.String(), envPath+"="+path,
			envSessionID+"=0x"+strconv.FormatInt(s.ID(), 16), envID+"="+f.id)
	}

	if !f.once {
		return electRun(sv, f, log, e, s, argv, env)
	}
	lease, err := e.Campaign(ctx, []byte(f.id))
	stopWatch()
	if err != nil {
		switch {
		case sv.got != nil:
			log.Info("interrupted while campaigning", "signal", sv.got)
			return signalStatus(sv.got)
		}
		return failStatus(log, "leadership", err)
	}
	if sv.got != nil { // the signal came with the leadership: don't start the command
		log.Info("interrupted as leadership was granted", "signal", sv.got)
		resign(e, s, log)
		return signalStatus(sv.got)
	}
	log.Info("leading", "token", lease.Token(), "session", fmt.Sprintf("0x%x", s.ID()))
	return runUnder(log, lease, argv, env(lease.Token()), sigs, f.grace, "leadership", func(bool) { resign(e, s, log) })
}

// electRun is elect without --once: election.Run, with the command started
// for every term of leadership and stopped at its end.
func electRun(sv *supervisor, f *electFlags, log *slog.Logger, e *election.Election, s *zookeeper.Session, argv []string, env func(fence.Token) []string) int {
	ctx, cancel, sigs := sv.ctx, sv.cancel, sv.sigs
	var startErr error // set by the leader function, which Run calls on this goroutine
	// The loop: the signal watcher ends ctx, which ends the leader
	// function's context, which stops the command.
	err := election.Run(ctx, e, []byte(f.id), func(lctx context.Context, token fence.Token) error {
		log.Info("leading", "token", token, "session", fmt.Sprintf("0x%x", s.ID()))
		c, err := startChild(log, argv, env(token))
		if err != nil {
			// Campaigning again cannot help: stop, as lock does.
			startErr = err
			cancel(err)
			return err
		}
		// The watcher takes the first signal and ends ctx, and so
		// lctx, with it: supervise forwards it to the command as lock
		// does, and reads a second one (SIGKILL at once) from sigs. While
		// a lost leadership's command stops, ctx's end is that signal.
		switch out, sig := c.supervise(lctx, nil, sigs, ctx.Done(), f.grace); out {
		case interrupted:
			log.Info("interrupted; the command has exited", "signal", sig, "command", c.describe())
			return nil
		case lost:
			if ctx.Err() != nil {
				log.Info("interrupted; the command was stopped", "command", c.describe())
			} else {
				log.Warn("leadership ended; the command was stopped", "token", token,
					"cause", context.Cause(lctx), "command", c.describe())
			}
			return nil
		}
		if st := c.status(); st != 0 {
			return fmt.Errorf("the command exited with status %d", st)
		}
		log.Info("the command exited; campaigning again", "command", c.describe())
		return nil
	})
	sv.stopWatch()
	switch {
	case sv.got != nil:
		log.Info("interrupted", "signal", sv.got)
		return signalStatus(sv.got)
	case startErr != nil:
		log.Error("cannot start the command", "argv", argv, "err", startErr)
		return startStatus(startErr)
	}
	// Run ends only on an error that campaigning again cannot cure.
	return failStatus(log, "leadership", err)
}

// resign gives leadership up, bounded by the session timeout.
func resign(e *election.Election, s *zookeeper.Session, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), s.SessionTimeout())
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		log.Warn("resign failed; closing the session removes the node", "err", err)
		return
	}
	log.Info("resigned")
}

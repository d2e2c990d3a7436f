package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const registerUsage = `Usage: zkrecipes register [flags] GROUP ID [--data STRING] -- CMD [ARGS...]

Join the group GROUP as member ID, run CMD while a member, leave the group
when CMD exits, and exit with CMD's status. The registration lives while
zkrecipes does: when it is in doubt or lost (a connection suspended, a
ZooKeeper session or etcd lease lost) the library registers again by
itself, logged at WARN (with the cause) and at INFO once registered again.
CMD keeps running meanwhile, unless --stop-when-lost is given: then CMD is
stopped (SIGTERM, then SIGKILL after --grace) the moment the registration
is in doubt, and zkrecipes exits 79.

The group service is the one --servers (or ZK_SERVERS) names:
  host:port,host:port[/chroot]           ZooKeeper: GROUP is a directory, e.g. /groups/workers
  etcd://host:2379[,host:2379][/prefix]  etcd: GROUP is a name with the lock names' rules
Membership works with ZooKeeper and etcd only.
ID is 1 to 128 bytes of UTF-8 without control characters or '/', not "."
or "..". One live registration holds an ID: a second one exits 75 (a killed
member's registration stays until its session timeout or --ttl passes).

CMD runs in a process group of its own, with ZKRECIPES_GROUP, ZKRECIPES_ID
and, with ZooKeeper, ZKRECIPES_SESSION_ID (the session that registered) in
its environment, but not ZK_SERVERS and ZK_AUTH, unless --pass-env names
them. SIGINT, SIGTERM and SIGHUP sent to zkrecipes are forwarded to CMD's
group (SIGKILL after --grace); the member leaves once CMD has exited.

Examples:
  # a worker the others can find, its address as its data
  zkrecipes register /groups/workers "$(hostname)" --data "$(hostname):8080" -- ./worker
  # on etcd; stop the worker while others may not see it in the group
  zkrecipes register --servers etcd://e1:2379/myapp --stop-when-lost workers w1 -- ./worker
  # who is there
  zkrecipes members /groups/workers

Exit statuses: CMD's status; 64 usage (a bad ID or GROUP, a backend other
than ZooKeeper or etcd); 69 server unreachable; 70 other error; 75 another
live registration holds ID; 79 registration lost with --stop-when-lost,
CMD stopped; 130/143 interrupted before CMD ran.
`

// envGroup is the register command's GROUP, in its child's environment.
const envGroup = "ZKRECIPES_GROUP"

type registerFlags struct {
	groupFlags
	data         string
	grace        time.Duration
	stopWhenLost bool
}

func runRegister(args []string, stdout, stderr io.Writer) int {
	var f registerFlags
	fs := newFlagSet("register", registerUsage, stdout, stderr)
	f.register(fs, true, "info")
	fs.Lookup("servers").Usage += "; or etcd://host:port[,host:port][/prefix]"
	fs.StringVar(&f.data, "data", "", "the member's data, shown by members (default host:pid)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM, how long CMD gets to exit before SIGKILL")
	fs.DurationVar(&f.ttl, "ttl", defaultTTL, "etcd: the lease's time to live, after which the server drops the registration of a member it has not heard from")
	fs.BoolVar(&f.stopWhenLost, "stop-when-lost", false, "stop CMD (exit 79) the moment the registration is in doubt or lost, instead of letting it run while zkrecipes registers again")
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) != 2:
		return usageError(stderr, fs, "want GROUP and ID before --, got %d arguments %q", len(pos), pos)
	case len(cmd) == 0:
		return usageError(stderr, fs, "no command: put it after --, as in: zkrecipes register %s %s -- CMD [ARGS...]", termSafe(pos[0]), termSafe(pos[1]))
	case f.grace < 0:
		return usageError(stderr, fs, "--grace %v must not be negative", f.grace)
	case f.ttl <= 0:
		return usageError(stderr, fs, "--ttl %v must be positive", f.ttl)
	}
	if code := f.checkGroup(stderr, fs, pos[0]); code >= 0 {
		return code
	}
	if err := recipe.CheckMemberID(pos[1]); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if !flagSet(fs, "data") {
		host, _ := os.Hostname()
		f.data = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	return registerMain(&f, pos[0], pos[1], cmd, stderr)
}

func registerMain(f *registerFlags, name, id string, argv []string, stderr io.Writer) int {
	log := f.logger(stderr).With("group", shortpath.Of(name), "id", id)
	if f.backend != zkBackend {
		log = log.With("backend", string(f.backend))
	}
	var gs *groupService
	sv, code := f.supervise(log, func(ctx context.Context, met *metricsServer) (func(), int) {
		var code int
		if gs, code = f.openGroup(ctx, log, met, name); code >= 0 {
			return nil, code
		}
		return gs.close, -1
	})
	if code >= 0 {
		return code
	}
	defer sv.close()

	m, err := gs.g.Join(sv.ctx, id, []byte(f.data))
	if err != nil {
		sv.stopWatch()
		return joinStatus(log, sv.got, err)
	}
	var leaving atomic.Bool
	logged := logRegistrations(m, log, gs.session, &leaving)
	leave := func() {
		leaving.Store(true)
		leaveGroup(m, gs.bound, log)
		logged()
	}
	owned := context.Background() // never ends: CMD runs through a re-registration
	if f.stopWhenLost {
		owned, err = m.Registered(sv.ctx)
	}
	sv.stopWatch()
	switch {
	case sv.got != nil: // the signal came with the registration: don't start the command
		log.Info("interrupted as the member registered", "signal", sv.got)
		leave()
		return signalStatus(sv.got)
	case err != nil:
		leave()
		return failStatus(log, "registration", err)
	}
	env := childEnv(os.Environ(), f.sec.passEnv, envGroup+"="+name, envID+"="+id)
	if s := gs.session(); s != "" {
		env = append(env, envSessionID+"="+s)
	}
	c, err := startChild(log, argv, env)
	if err != nil {
		log.Error("cannot start the command", "argv", argv, "err", err)
		leave()
		return startStatus(err)
	}
	out, sig := c.supervise(owned, sv.sigs, nil, nil, f.grace)
	switch out {
	case lost:
		log.Error("registration lost; the command was stopped", "cause", context.Cause(owned), "command", c.describe())
		leave()
		return exitLost
	case interrupted:
		log.Info("interrupted; the command has exited", "signal", sig, "command", c.describe())
	default:
		log.Info("the command exited", "command", c.describe())
	}
	leave()
	return c.status()
}

// joinStatus logs why Join failed and returns the exit status: the
// signal's (got, if one interrupted it), 75 when another live registration
// holds the id, else failStatus's.
func joinStatus(log *slog.Logger, got os.Signal, err error) int {
	switch {
	case got != nil:
		log.Info("interrupted while registering", "signal", got)
		return signalStatus(got)
	case errors.Is(err, recipe.ErrMemberExists):
		log.Warn("another live registration holds ID (a killed member's stays until its session or lease expires)", "err", err)
		return exitHeld
	}
	return failStatus(log, "registration", err)
}

// logRegistrations logs every change of m's registration: the first at
// INFO, one in doubt or lost at WARN with its cause, a new one at INFO
// (with the session that made it: session, "" on etcd), and the member's
// end for good at ERROR unless leaving is set (Leave). The returned func
// waits until the member's end has been logged (call it after Leave).
func logRegistrations(m recipe.Member, log *slog.Logger, session func() string, leaving *atomic.Bool) (wait func()) {
	ch := m.Listen(context.Background()) // closed at the member's end
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last recipe.Registration
		for n := 0; ; n++ {
			r, ok := <-ch
			if !ok {
				break
			}
			last = r
			attrs := []any{"since", r.Since}
			if s := session(); s != "" && r.Registered {
				attrs = append(attrs, "session", s)
			}
			switch {
			case r.Registered && n == 0:
				log.Info("registered", attrs...)
			case r.Registered:
				log.Info("registered again", attrs...)
			case !errors.Is(r.Cause, recipe.ErrLeft):
				log.Warn("registration in doubt or lost; registering again", append(attrs, "cause", r.Cause)...)
			}
		}
		if !leaving.Load() && !errors.Is(last.Cause, recipe.ErrLeft) {
			log.Error("no longer registered: the member stopped registering again", "cause", last.Cause)
		}
	}()
	return func() { <-done }
}

// leaveGroup makes m leave its group, within bound (the session timeout or
// TTL: what is not confirmed then goes with the session's Close).
func leaveGroup(m recipe.Member, bound time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := m.Leave(ctx); err != nil {
		log.Warn("leaving the group is unconfirmed; closing the session removes the registration", "err", err)
		return
	}
	log.Info("left the group")
}

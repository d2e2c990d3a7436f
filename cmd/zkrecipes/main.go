// Command zkrecipes runs commands under locks and ZooKeeper elections, and
// shows who holds them: the cron-singleton tool of the zkrecipes library.
//
//	zkrecipes lock [flags] PATH -- CMD [ARGS...]     run CMD while holding the lock at PATH
//	zkrecipes elect [flags] PATH --id ID -- CMD ...  run CMD while leader, campaign again after
//	zkrecipes inspect [flags] PATH                   holder, waiters or candidates, in order
//	zkrecipes register [flags] GROUP ID -- CMD ...   run CMD while a member of GROUP
//	zkrecipes members [flags] GROUP                  the group's members (--watch: follow)
//	zkrecipes watch [flags] PATH                     a path's nodes, then every change
//
// lock works with every backend of the library, chosen by the scheme of
// --servers: a ZooKeeper host:port list (no scheme), etcd://,
// postgres://, redis:// or k8s://; register, members and watch with
// ZooKeeper and etcd; elect and inspect with ZooKeeper only. The
// child command gets the fencing token in ZKRECIPES_TOKEN, and is stopped
// (SIGTERM, then SIGKILL after --grace) the moment ownership is in doubt.
// See docs/cli.md for every flag, exit status and environment variable.
//
// Install: go install github.com/zkrecipes/zkrecipes/cmd/zkrecipes@latest
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
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkname"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Exit statuses of zkrecipes itself. A child's own status is passed through
// unchanged (0-255; 128+n when it was killed by signal n, as shells report
// it; 127 and 126 when it could not be found or executed).
const (
	// exitUsage (EX_USAGE): bad flags or arguments, an invalid path, a
	// path in use by another recipe or mode (recipe.ErrMixedRecipes).
	exitUsage = 64
	// exitNoNode (EX_NOINPUT): inspect's path does not exist.
	exitNoNode = 66
	// exitUnavailable (EX_UNAVAILABLE): no server answered within
	// --connect-timeout (ZooKeeper, etcd, PostgreSQL or Redis), or the
	// session or connection was lost before the lock was granted.
	exitUnavailable = 69
	// exitSoftware (EX_SOFTWARE): any other failure of zkrecipes (an ACL
	// refusal, a refused password, an unexpected server error).
	exitSoftware = 70
	// exitHeld (EX_TEMPFAIL): the lock is held elsewhere and --wait
	// passed (at once with --wait 0): try again later, as cron will.
	exitHeld = 75
	// exitLost: ownership was lost while the command ran (session expired
	// or presumed expired, connection suspended per policy, lock node
	// deleted); the command was stopped. Outside sysexits' range and
	// below the shells' 126+, so it means nothing else.
	exitLost = 79
)

// Environment variables.
const (
	envServers   = "ZK_SERVERS"           // default of --servers
	envToken     = "ZKRECIPES_TOKEN"      // to the child: the fencing token (decimal)
	envPath      = "ZKRECIPES_PATH"       // to the child: the lock or election path
	envSessionID = "ZKRECIPES_SESSION_ID" // to the child: the ZooKeeper session id (0x hex)
	envID        = "ZKRECIPES_ID"         // to elect's child: its --id
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const mainUsage = `zkrecipes: locks and elections for commands, with fencing tokens.

Usage:
  zkrecipes lock [flags] PATH -- CMD [ARGS...]      run CMD while holding the lock at PATH
  zkrecipes elect [flags] PATH --id ID -- CMD [ARGS...]
                                                    run CMD while leader of the election at PATH
  zkrecipes inspect [flags] PATH                    show holder, waiters or candidates in order
  zkrecipes register [flags] GROUP ID -- CMD [ARGS...]
                                                    run CMD while a member ID of the group GROUP
  zkrecipes members [flags] GROUP                   list (or --watch) the group's members
  zkrecipes watch [flags] PATH                      print PATH's nodes, then every change

Run 'zkrecipes COMMAND --help' for a command's flags and examples.
Servers come from --servers or ZK_SERVERS: ZooKeeper's "host:port,host:port/chroot";
for lock also etcd://host:2379[/prefix], postgres://user@host/db, redis://host:6379[/db]
and k8s:// (a Kubernetes Lease, on the cluster of --kubeconfig); for register,
members and watch also etcd://.

Example (crontab: the nightly job runs on one machine only; the others exit 75):
  0 3 * * * $HOME/go/bin/zkrecipes lock --log-level warn --wait 0 /cron/nightly -- ./nightly.sh

Exit statuses: the command's own status, or
  64 usage error   66 no such path (inspect)   69 server unreachable
  70 other error   75 held elsewhere (--wait passed; register: ID taken)
  79 ownership (register --stop-when-lost: registration) lost, command stopped
  130/143 zkrecipes interrupted (SIGINT/SIGTERM) before the command ran
`

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case guardArg:
		return runGuard(args[1:])
	case "lock":
		return runLock(args[1:], stdout, stderr)
	case "elect":
		return runElect(args[1:], stdout, stderr)
	case "inspect":
		return runInspect(args[1:], stdout, stderr)
	case "members":
		return runMembers(args[1:], stdout, stderr)
	case "register":
		return runRegister(args[1:], stdout, stderr)
	case "watch":
		return runWatch(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	fmt.Fprintf(stderr, "zkrecipes: unknown command %q\n\n%s", args[0], mainUsage)
	return exitUsage
}

// common holds the flags every command has.
type common struct {
	servers        string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	logFormat      string
	logLevel       string
	metricsAddr    string
	tolerate       float64
	sec            secFlags // credentials, ACL, --pass-env (auth.go)
	tls            tlsFlags // --tls and --tls-* (tls.go)
	backend        backend  // of servers, set by check
}

// register registers the common flags; logLevel is --log-level's default
// (inspect, a read-only query, is quiet unless something fails).
func (c *common) register(fs *flag.FlagSet, withOwnership bool, logLevel string) {
	fs.StringVar(&c.servers, "servers", os.Getenv(envServers), "ZooKeeper servers, `host:port,...[/chroot]`; a host without a port means port 2181 (default $"+envServers+")")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 10*time.Second, "ZooKeeper session timeout requested from the server")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "give up (exit 69) when no server answers within this `duration`")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&c.logLevel, "log-level", logLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`addr`/metrics (e.g. :9464; empty: off)")
	c.tls.register(fs)
	if withOwnership {
		fs.Float64Var(&c.tolerate, "tolerate-suspension", 0,
			"keep ownership through a connection blip until `f` x session timeout after the last server reply (0.4-0.9; 0: give it up the moment the connection is suspended)")
	}
	c.sec.register(fs, withOwnership)
}

// check validates the common flags and sets c.backend; the error is a
// usage error.
func (c *common) check() error {
	switch {
	case strings.TrimSpace(c.servers) == "":
		return fmt.Errorf("no servers: set --servers or %s", envServers)
	case c.sessionTimeout <= 0:
		return fmt.Errorf("--session-timeout %v must be positive", c.sessionTimeout)
	case c.connectTimeout <= 0:
		return fmt.Errorf("--connect-timeout %v must be positive", c.connectTimeout)
	case c.logFormat != "text" && c.logFormat != "json":
		return fmt.Errorf("--log-format %q: want text or json", c.logFormat)
	case c.tolerate != 0 && !(c.tolerate >= 0.4 && c.tolerate <= 0.9):
		return fmt.Errorf("--tolerate-suspension %v: want 0 or a fraction in [0.4, 0.9]", c.tolerate)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	if err := c.tls.check(); err != nil {
		return err
	}
	c.servers = lowerScheme(c.servers)
	b, err := backendOf(c.servers)
	if err != nil {
		return err
	}
	c.backend = b
	c.sec.passEnv.keepFor(b)
	if b != zkBackend {
		return nil // the backend's Connect parses its URL
	}
	if err := c.sec.load(); err != nil {
		return err
	}
	return checkServers(c.servers)
}

// checkServers rejects a server list that cannot name servers: an empty
// entry, or a port that is not a number in 1..65535 (a missing port means
// 2181). A chroot suffix ("host:port/app") is allowed.
func checkServers(servers string) error {
	for _, a := range strings.Split(servers, ",") {
		a = strings.TrimSpace(a)
		if i := strings.IndexByte(a, '/'); i >= 0 {
			a = a[:i]
		}
		if a == "" {
			return fmt.Errorf("--servers %q: an empty server address", redact(servers))
		}
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			continue // a host without a port (2181), or an IPv6 address
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || h == "" {
			return fmt.Errorf("--servers %q: %q is not host:port with a port in 1..65535", redact(servers), hide(servers, redact(a)))
		}
	}
	return nil
}

// portless returns the entries of a server list that name no port.
func portless(servers string) []string {
	var out []string
	for _, a := range strings.Split(servers, ",") {
		a = strings.TrimSpace(a)
		if i := strings.IndexByte(a, '/'); i >= 0 {
			a = a[:i]
		}
		if _, _, err := net.SplitHostPort(a); err != nil && a != "" {
			out = append(out, a)
		}
	}
	return out
}

// connect opens the Session; on failure it logs and returns the exit
// status (-1 on success).
func (c *common) connect(ctx context.Context, log *slog.Logger, extra ...zookeeper.Option) (*zookeeper.Session, int) {
	opts := []zookeeper.Option{
		zookeeper.WithSessionTimeout(c.sessionTimeout),
		zookeeper.WithConnectTimeout(c.connectTimeout),
		zookeeper.WithLogger(log),
	}
	if c.tolerate != 0 {
		opts = append(opts, zookeeper.WithSuspendPolicy(zookeeper.TolerateSuspension(c.tolerate)))
	}
	opts = append(opts, c.sec.options(log)...)
	opts = append(opts, c.tls.zookeeper()...)
	if hosts := portless(c.servers); len(hosts) > 0 {
		log.Info("no port given: using ZooKeeper's default port", "hosts", hosts, "port", zkside.DefaultPort)
	}
	s, err := zookeeper.Connect(ctx, []string{c.servers}, append(opts, extra...)...)
	switch {
	case err == nil:
		return s, -1
	case errors.Is(err, recipe.ErrWrongServer):
		status, _ := wrongServerStatus(log, zkBackend, c.servers, err)
		return nil, status
	case tlsRejected(err):
		return nil, tlsStatus(log, zkBackend, c.servers, err)
	case errors.Is(err, recipe.ErrBadOption), errors.Is(err, recipe.ErrInvalidPath):
		log.Error("bad --servers or option", "servers", redact(c.servers), "err", err)
		return nil, exitUsage
	case errors.Is(err, recipe.ErrUnreachable):
		log.Error("cannot connect to ZooKeeper", "servers", redact(c.servers), "err", err)
		return nil, exitUnavailable
	}
	log.Error("cannot connect to ZooKeeper", "servers", redact(c.servers), "err", err)
	return nil, exitSoftware
}

// failStatus logs why taking a lock or leadership failed, and returns the
// exit status: one answer per kind of failure, whichever command or mode
// met it.
func failStatus(log *slog.Logger, what string, err error) int {
	switch {
	case errors.Is(err, recipe.ErrMixedRecipes):
		log.Error("the path is in use by another recipe (a lock of another mode, an election or a latch): use one recipe and mode per path", "err", err)
		return exitUsage
	case errors.Is(err, recipe.ErrInvalidPath), errors.Is(err, recipe.ErrTooLarge), errors.Is(err, recipe.ErrBadOption):
		log.Error("cannot use the path", "err", err)
		return exitUsage
	case errors.Is(err, zookeeper.ErrUntrustedDir):
		log.Error(untrustedDirMsg, "err", err)
		return exitSoftware
	case errors.Is(err, recipe.ErrNoPermission):
		log.Error("permission denied (with ZooKeeper: the path's ACL; give the credentials its nodes were created with, --auth-file or "+envAuth+
			"; with Kubernetes: the user's Role needs get, watch, create and update on leases)", "err", err)
		return exitSoftware
	case errors.Is(err, recipe.ErrSessionLost), errors.Is(err, recipe.ErrUnreachable):
		log.Error("the session was lost before the "+what+" was granted", "err", err)
		return exitUnavailable
	case unavailable(err):
		log.Error("the connection to the server was lost before the "+what+" was granted", "err", err)
		return exitUnavailable
	}
	log.Error("cannot take the "+what, "err", err)
	return exitSoftware
}

// parse parses args into fs, allowing flags before and after the
// positional arguments (up to "--"), and returns the positional arguments
// and the command after "--" (nil if there is no "--").
func parse(fs *flag.FlagSet, args []string) (pos, cmd []string, err error) {
	before := args
	for i, a := range args {
		if a == "--" {
			before, cmd = args[:i], args[i+1:]
			if cmd == nil {
				cmd = []string{}
			}
			break
		}
	}
	for {
		if err := fs.Parse(before); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			return pos, cmd, nil
		}
		pos = append(pos, fs.Arg(0))
		before = fs.Args()[1:]
	}
}

// newFlagSet returns a FlagSet whose errors go to stderr, followed by a
// hint to run --help (the full usage, with examples, is for --help).
func newFlagSet(name, usage string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("zkrecipes "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "Run '%s --help' for usage.\n", fs.Name()) }
	helps[fs] = usage
	return fs
}

// helps holds each FlagSet's full usage text.
var helps = map[*flag.FlagSet]string{}

// printHelp prints fs's full usage, with examples and flags, to w.
func printHelp(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, helps[fs])
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// parseArgs runs parse and turns its outcome into an exit status (-1: go
// on). -h, -help or --help anywhere before "--" prints the full usage to
// stdout and exits 0.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos, cmd []string, code int) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			printHelp(fs, stdout)
			return nil, nil, 0
		}
	}
	pos, cmd, err := parse(fs, args)
	if err != nil {
		return nil, nil, exitUsage // the flag package printed the error and the hint
	}
	if err := noEmpty(fs); err != nil {
		return nil, nil, usageError(stderr, fs, "%v", err)
	}
	return pos, cmd, -1
}

// usageError prints a usage error and returns exitUsage.
func usageError(stderr io.Writer, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return exitUsage
}

// quotePath quotes p for a message: a path shortpath.Of shortens is
// shortened the same way (its first 64 bytes, quoted, and its length).
func quotePath(p string) string {
	if shortpath.Of(p) == p {
		return strconv.Quote(p)
	}
	return fmt.Sprintf("%q… (%d bytes)", p[:64], len(p))
}

// checkPath validates a recipe path, naming the path and the rule.
func checkPath(stderr io.Writer, fs *flag.FlagSet, p string) int {
	if why, _ := zkname.CheckPath(p); why != "" {
		return usageError(stderr, fs, "invalid path %s: %s (a ZooKeeper path like /locks/nightly)", quotePath(p), why)
	}
	return -1
}

// supervisor is what lock and elect set up before they take anything:
// SIGINT, SIGTERM and SIGHUP watched (the first cancels ctx and is kept in
// got, which may be read once stopWatch has returned), metrics served, and
// the session connected.
type supervisor struct {
	ctx       context.Context
	cancel    context.CancelCauseFunc // ends ctx (a signal does too)
	sigs      chan os.Signal
	got       os.Signal
	stopWatch func()
	undo      []func() // run in reverse by close
}

// supervise sets a supervisor up, connecting with connect (which returns
// how to close what it opened, or an exit status); on failure it returns
// the exit status (code >= 0) with everything it started already undone.
func (c *common) supervise(log *slog.Logger, connect func(context.Context, *metricsServer) (func(), int)) (_ *supervisor, code int) {
	logWithheld(log, c.sec.passEnv)
	sv := &supervisor{sigs: notifySignals()}
	sv.undo = append(sv.undo, func() { signal.Stop(sv.sigs) })
	ctx, cancel := context.WithCancelCause(context.Background())
	sv.ctx, sv.cancel = ctx, cancel
	sv.undo = append(sv.undo, func() { cancel(nil) })
	sv.stopWatch = watchSignals(sv.sigs, func(sig os.Signal) { sv.got = sig; cancel(interrupt{sig}) })
	sv.undo = append(sv.undo, sv.stopWatch)
	defer func() {
		if code >= 0 {
			sv.close()
		}
	}()
	met, code := startMetrics(c.metricsAddr, log)
	if code >= 0 {
		return nil, code
	}
	sv.undo = append(sv.undo, met.close)
	closeSession, code := connect(ctx, met)
	if code >= 0 {
		sv.stopWatch()
		if sv.got != nil {
			return nil, signalStatus(sv.got)
		}
		return nil, code
	}
	sv.undo = append(sv.undo, closeSession)
	return sv, -1
}

// close undoes what supervise set up, in reverse order.
func (sv *supervisor) close() {
	for i := len(sv.undo) - 1; i >= 0; i-- {
		sv.undo[i]()
	}
}

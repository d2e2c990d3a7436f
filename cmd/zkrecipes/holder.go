package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// HolderView is what inspect (on a backend other than ZooKeeper) and
// elect --observe print: one per state, a JSON line with --json.
type HolderView struct {
	Name  string    `json:"name"`
	At    time.Time `json:"at"`
	Held  bool      `json:"held"`
	ID    string    `json:"id,omitempty"`
	Token uint64    `json:"token,omitempty"`
	Since time.Time `json:"since,omitzero"`
}

// serversIn returns the --servers that args give (the last value before
// "--"), else $ZK_SERVERS, and whether -h or --help is among them.
func serversIn(args []string) (servers string, help bool) {
	servers = os.Getenv(envServers)
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "h" || name == "help":
			return servers, true
		case name == "servers" && inline:
			servers = val
		case name == "servers" && i+1 < len(args):
			servers = args[i+1]
		}
	}
	return servers, false
}

// otherBackend reports whether args name a lock service other than
// ZooKeeper (and no -h): inspect and elect --observe then show the holder
// of a lock of that backend.
func otherBackend(args []string) bool {
	servers, help := serversIn(args)
	b, _ := backendOf(servers)
	return !help && b != "" && b != zkBackend
}

// holderFlags are the flags of a holder view: the lock service's (lock's
// connection flags) and the output's.
type holderFlags struct {
	lockFlags
	json  bool
	watch bool
}

// holderFlagSet is the flag set of a holder view: the lock service's
// connection flags and the output's (--watch, or elect's --observe).
func holderFlagSet(name, usage string, observe bool, stdout, stderr io.Writer) (*flag.FlagSet, *holderFlags) {
	var f holderFlags
	fs := newFlagSet(name, usage, stdout, stderr)
	f.register(fs, false, "warn")
	f.registerKubeconfig(fs)
	fs.BoolVar(&f.json, "json", false, "print one JSON line per state")
	if observe {
		fs.BoolVar(&f.watch, "observe", false, "follow the leader: print it, then every change, until SIGINT or SIGTERM")
	} else {
		fs.BoolVar(&f.watch, "watch", false, "print again after every change, until SIGINT or SIGTERM")
	}
	f.ttl = defaultTTL
	return fs, &f
}

// runHolder is inspect (watch: --watch) and elect --observe (watch always)
// on any backend: it parses the flags of a lock service, then shows who
// holds the lock named by the one positional argument.
func runHolder(name, usage string, args []string, observe bool, stdout, stderr io.Writer) int {
	fs, f := holderFlagSet(name, usage, observe, stdout, stderr)
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || cmd != nil {
		return usageError(stderr, fs, "want exactly one lock name, got %q", append(pos, cmd...))
	}
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
	} else if err := checkLockName(f.backend, pos[0]); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	return holderMain(f, pos[0], observe, stdout, stderr)
}

// holderMain opens the lock service, then prints the lock's state (and,
// with f.watch, every change) until ctx ends.
func holderMain(f *holderFlags, name string, election bool, stdout, stderr io.Writer) int {
	log := f.logger(stderr).With("lock", shortpath.Of(name), "backend", string(f.backend))
	ctx, met, end, code := startReadOnly(f.metricsAddr, log)
	if code >= 0 {
		return code
	}
	defer end()
	ls, code := f.open(ctx, log, met, nil)
	if code >= 0 {
		return code
	}
	defer ls.close()
	obs, err := ls.observer(name, election)
	if err != nil {
		log.Error("cannot read the lock", "err", err)
		return exitSoftware
	}
	if !f.watch {
		st, err := obs.Holder(ctx)
		if err != nil {
			return holderError(ctx, log.Error, err)
		}
		printHolder(stdout, name, st, f.json)
		return 0
	}
	for st := range obs.ObserveHolder(ctx) {
		printHolder(stdout, name, st, f.json)
	}
	if ctx.Err() != nil {
		return 0
	}
	// Closed early: on an error retrying cannot cure (say another recipe's
	// nodes), which one more read returns, or with the session.
	if _, err := obs.Holder(ctx); err != nil {
		if errors.Is(err, recipe.ErrMixedRecipes) {
			log.Error("following the lock ended: the path is in use by another recipe", "err", err)
			return exitUsage
		}
		return holderError(ctx, log.Error, err)
	}
	log.Error("following the lock ended: the session was lost or closed")
	return exitUnavailable
}

// observer returns the HolderObserver of the lock named name: a ZooKeeper
// election's for elect --observe, else the backend's lock.
func (ls *lockService) observer(name string, elect bool) (recipe.HolderObserver, error) {
	if elect && ls.zk != nil {
		return election.New(ls.zk, name)
	}
	l, err := ls.newLock(name)
	if err != nil {
		return nil, err
	}
	if o, ok := l.(recipe.HolderObserver); ok {
		return o, nil
	}
	return nil, fmt.Errorf("the %s lock cannot show its holder", ls.backend)
}

// holderError logs why a read failed and returns the exit status: 69 for
// a server that cannot be reached, 70 otherwise.
func holderError(ctx context.Context, logErr func(string, ...any), err error) int {
	if ctx.Err() != nil {
		return 0
	}
	if unavailable(err) {
		logErr("reading the lock failed: the server cannot be reached", "err", err)
		return exitUnavailable
	}
	logErr("reading the lock failed", "err", err)
	return exitSoftware
}

// printHolder prints st: a line for people ("held by "ID" token T since
// S", the ID quoted so that no byte of it reaches the terminal raw), or a
// JSON line (escaped as inspect's).
func printHolder(w io.Writer, name string, st recipe.HolderState, asJSON bool) {
	v := HolderView{Name: name, At: time.Now().UTC(), Held: st.Held}
	if st.Held {
		v.ID, v.Token, v.Since = st.Holder.ID, uint64(st.Holder.Token), st.Holder.Since.UTC()
	}
	if asJSON {
		json.NewEncoder(jsonWriter{w}).Encode(v)
		return
	}
	if !st.Held {
		fmt.Fprintf(w, "%s free\n", v.At.Format(time.RFC3339))
		return
	}
	since := ""
	if !v.Since.IsZero() {
		since = " since " + v.Since.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "%s held by %q token %d%s\n", v.At.Format(time.RFC3339), v.ID, v.Token, since)
}

// observeArgs reports whether args are elect --observe's: they parse as
// the holder view's flags (no --id, --once, --grace, no command) with
// --observe true. Otherwise elect campaigns, and refuses --observe.
func observeArgs(args []string) bool {
	fs, f := holderFlagSet("elect", "", true, io.Discard, io.Discard)
	_, cmd, code := parseArgs(fs, args, io.Discard, io.Discard)
	return code < 0 && cmd == nil && f.watch
}

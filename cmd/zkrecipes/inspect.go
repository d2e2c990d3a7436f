package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkname"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const inspectUsage = `Usage: zkrecipes inspect [flags] PATH

Show the participants of the lock, read-write lock, semaphore, election or
leader latch at PATH, in queue order: role (holder, leader, waiting, ...),
fencing token, owning session, node age, data (the holder's host:pid as
zkrecipes lock writes it, an election candidate's --id) and znode name.
inspect only reads: it creates nothing in ZooKeeper.

With --servers naming etcd://, postgres://, redis:// or k8s:// (as lock
takes them), inspect shows who holds the lock named PATH instead: free, or
held by the holder's published ID with its token and, where the backend
records it, since when (--json: {"name","at","held","id","token","since"}).

The recipe is recognised from the node names. A semaphore's holders are
told by the limit stored with its directory (lock --semaphore stores it);
for one without, give --semaphore N.

Examples:
  zkrecipes inspect /cron/nightly
  zkrecipes inspect --json /elections/scheduler | jq '.participants[0].data'
  zkrecipes inspect --watch /locks/migrate      # follow changes until Ctrl-C

Nodes of a kind no zkrecipes recipe uses, which make lock and elect
refuse PATH, are listed too, with the role "foreign".

Exit statuses: 0; 64 usage; 66 PATH does not exist; 69 ZooKeeper
unreachable or the connection lost; 70 other error (e.g. an ACL refusal).
`

// allKinds are the node kinds of every recipe of the module.
var allKinds = []string{mutex.Kind, mutex.WriteKind, mutex.ReadKind, mutex.SemaphoreKind, election.Kind, latch.Kind}

type inspectFlags struct {
	common
	json      bool
	watch     bool
	semaphore int
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	var f inspectFlags
	fs := newFlagSet("inspect", inspectUsage, stdout, stderr)
	f.register(fs, false, "warn")
	fs.BoolVar(&f.json, "json", false, "print one JSON document (with --watch: one JSON line per change)")
	fs.BoolVar(&f.watch, "watch", false, "print again after every change, until SIGINT or SIGTERM")
	fs.Var((*decimalFlag)(&f.semaphore), "semaphore", "the semaphore's number of `N` leases, to tell its holders")
	if otherBackend(args) {
		return runHolder("inspect", inspectUsage, args, false, stdout, stderr)
	}
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) != 1 || cmd != nil:
		return usageError(stderr, fs, "want exactly one PATH, got %q", append(pos, cmd...))
	case f.semaphore < 0:
		return usageError(stderr, fs, "--semaphore %d: want a number of leases >= 1", f.semaphore)
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
	return inspectMain(&f, pos[0], stdout, stderr)
}

// View is what inspect prints: the JSON document, one per change with
// --watch.
type View struct {
	Path         string    `json:"path"`
	Recipe       string    `json:"recipe"` // mutex, rwlock, semaphore, election, latch, mixed, or "" (empty)
	At           time.Time `json:"at"`
	Exists       bool      `json:"exists"`
	Participants []Entry   `json:"participants"`
}

// Entry is one participant.
type Entry struct {
	Position  int       `json:"position"`
	Role      string    `json:"role"` // holder, leader, waiting, queued, or foreign (roleForeign)
	Kind      string    `json:"kind"`
	Token     uint64    `json:"token"`
	SessionID string    `json:"session_id"`
	Created   time.Time `json:"created"`
	AgeSec    float64   `json:"age_seconds"`
	Data      string    `json:"data"`
	Node      string    `json:"node"`
}

func inspectMain(f *inspectFlags, path string, stdout, stderr io.Writer) int {
	log := f.logger(stderr).With("path", shortpath.Of(path))
	ctx, met, end, code := startReadOnly(f.metricsAddr, log)
	if code >= 0 {
		return code
	}
	defer end()
	s, code := f.connect(ctx, log, met.option()...)
	if code >= 0 {
		return code
	}
	defer s.Close()
	abs := zkside.SessionOf(s).Chroot() + path
	l, err := newLister(s, path, abs)
	if err != nil {
		log.Error("cannot read the path", "err", err)
		return exitSoftware
	}
	for first := true; ; first = false {
		exists, ev, again, err := lookAt(s.Conn(), abs, f.watch)
		if again {
			continue
		}
		if err != nil {
			return inspectError(ctx, log, err)
		}
		if !exists && !f.watch {
			log.Error("no such znode: nothing was ever locked or elected there, or it was removed when empty")
			return exitNoNode
		}
		var ps []zookeeper.Participant
		if exists {
			if ps, err = l.participants(ctx); err != nil {
				return inspectError(ctx, log, err)
			}
		}
		v := view(path, exists, ps, leasesOf(s.Conn(), abs, exists, f.semaphore))
		if f.json {
			enc := json.NewEncoder(jsonWriter{stdout}) // escapes what terminals obey
			if !f.watch {
				enc.SetIndent("", "  ")
			}
			enc.Encode(v)
		} else {
			printView(stdout, v, f.watch, first)
		}
		if !f.watch {
			return 0
		}
		select {
		case e := <-ev:
			if e.Err != nil && !errors.Is(e.Err, zk.ErrSessionExpired) && !errors.Is(e.Err, zk.ErrClosing) {
				log.Warn("watch ended", "err", e.Err)
			}
		case <-ctx.Done():
			return 0
		}
	}
}

// leasesOf is the semaphore's number of leases inspect tells holders by:
// --semaphore's N if given, else the limit stored in the directory's data
// (mutex.StoredLimit, lock --semaphore), else 0 (none known).
func leasesOf(conn *zk.Conn, abs string, exists bool, given int) int {
	if given > 0 || !exists {
		return given
	}
	data, _, err := conn.Get(abs)
	if err != nil {
		return 0
	}
	n, err := mutex.LimitOf(data)
	if err != nil {
		return 0
	}
	return n
}

// lookAt reads whether abs exists; with watch it first sets the watch that
// fires at the next change (a child watch on an existing node, which fires
// on a child created or deleted and on its deletion; an exists watch on a
// missing one), so that a change after the read fires it. again reports a
// change in between: look again.
func lookAt(conn *zk.Conn, abs string, watch bool) (exists bool, ev <-chan zk.Event, again bool, err error) {
	exists, _, err = conn.Exists(abs)
	if err != nil || !watch {
		return exists, nil, false, err
	}
	if exists {
		_, _, ev, err = conn.ChildrenW(abs)
		if errors.Is(err, zk.ErrNoNode) {
			return false, nil, true, nil // deleted in between
		}
		return true, ev, false, err
	}
	if exists, _, ev, err = conn.ExistsW(abs); err == nil && exists {
		return true, nil, true, nil // created in between (the data watch set stays until it fires)
	}
	return exists, ev, false, err
}

// inspectError logs why reading the path failed and returns the exit
// status of docs/cli.md's table: 69 only for a server that cannot be
// reached or a connection or session lost, 70 for every other failure.
func inspectError(ctx context.Context, log *slog.Logger, err error) int {
	if ctx.Err() != nil {
		return 0
	}
	switch {
	case errors.Is(err, recipe.ErrNoPermission), errors.Is(err, zk.ErrNoAuth):
		log.Error("reading the path failed: permission denied (the path's ACL: give credentials it grants, --auth-file or "+envAuth+")", "err", err)
		return exitSoftware
	case unavailable(err), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired):
		log.Error("reading the path failed: the connection to ZooKeeper was lost", "err", err)
		return exitUnavailable
	}
	log.Error("reading the path failed", "err", err)
	return exitSoftware
}

// view turns a listing into roles, with the recipe's own rule.
func view(path string, exists bool, ps []zookeeper.Participant, leases int) View {
	now := time.Now()
	v := View{Path: path, At: now, Exists: exists, Participants: []Entry{}}
	kinds := map[string]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
	}
	names := nodeNames(ps)
	var rule zookeeper.Rule
	holder := "holder"
	switch {
	case len(kinds) == 0:
	case len(kinds) == 1 && kinds[mutex.Kind]:
		v.Recipe, rule = "mutex", zookeeper.FirstHolds
	case len(kinds) <= 2 && !kinds[mutex.Kind] && (kinds[mutex.WriteKind] || kinds[mutex.ReadKind]) &&
		len(kinds) == btoi(kinds[mutex.WriteKind])+btoi(kinds[mutex.ReadKind]):
		v.Recipe, rule = "rwlock", mutex.RWRule
	case len(kinds) == 1 && kinds[mutex.SemaphoreKind]:
		v.Recipe = "semaphore"
		if leases > 0 {
			rule = mutex.SemaphoreRule(leases)
		}
	case len(kinds) == 1 && kinds[election.Kind]:
		v.Recipe, rule, holder = "election", zookeeper.FirstHolds, "leader"
	case len(kinds) == 1 && kinds[latch.Kind]:
		v.Recipe, rule, holder = "latch", zookeeper.FirstHolds, "leader"
	default:
		v.Recipe = "mixed"
	}
	for i, p := range ps {
		role := "queued" // no rule: a semaphore without --semaphore, or mixed kinds
		switch {
		case foreign(p.Kind):
			role = roleForeign
		case rule != nil:
			role = "waiting"
			if holds, _ := rule(names, i); holds {
				role = holder
			}
		}
		data := string(p.Data)
		if !utf8.ValidString(data) {
			data = fmt.Sprintf("%x", p.Data)
		}
		v.Participants = append(v.Participants, Entry{Position: i, Role: role, Kind: strings.TrimSuffix(p.Kind, "-"),
			Token: uint64(p.Token), SessionID: fmt.Sprintf("0x%x", p.SessionID), Created: p.Created,
			AgeSec: now.Sub(p.Created).Round(time.Millisecond).Seconds(), Data: data, Node: p.Name})
	}
	return v
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printView prints v as a table; data, node names and the path are
// escaped for the terminal (termSafe).
func printView(w io.Writer, v View, watch, first bool) {
	if watch && !first {
		fmt.Fprintln(w)
	}
	what := v.Recipe
	if what == "" {
		what = "empty"
	}
	switch {
	case !v.Exists:
		fmt.Fprintf(w, "%s: does not exist (%s)\n", termSafe(v.Path), v.At.Format(time.RFC3339))
		return
	case len(v.Participants) == 0:
		fmt.Fprintf(w, "%s: no participants (%s)\n", termSafe(v.Path), v.At.Format(time.RFC3339))
		return
	}
	fmt.Fprintf(w, "%s: %s, %d participant(s) (%s)\n", termSafe(v.Path), what, len(v.Participants), v.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tROLE\tKIND\tTOKEN\tSESSION\tAGE\tDATA\tNODE")
	for _, e := range v.Participants {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Position, e.Role, termSafe(e.Kind), e.Token, e.SessionID,
			time.Duration(e.AgeSec*float64(time.Second)).Round(100*time.Millisecond), termSafe(e.Data), termSafe(e.Node))
	}
	tw.Flush()
	if slices.ContainsFunc(v.Participants, func(e Entry) bool { return e.Role == roleForeign }) {
		fmt.Fprintln(w, "(foreign: a node named like a recipe's of a kind no zkrecipes recipe uses; lock and elect refuse the path while it is there)")
	}
	if v.Recipe == "semaphore" && v.Participants[0].Role == "queued" {
		fmt.Fprintln(w, "(give --semaphore N to tell holders from waiters)")
	}
}

// nodeNames returns the node names of ps as a Rule sees them, so that
// view can evaluate a Rule over the listing (the zero NodeName for a name
// outside the node-name grammar of its Kind).
func nodeNames(ps []zookeeper.Participant) []zookeeper.NodeName {
	names := make([]zookeeper.NodeName, len(ps))
	for i, p := range ps {
		if n, ok := zkname.Parse(p.Name, []string{p.Kind}); ok {
			names[i] = zookeeper.NodeName{Name: p.Name, GUID: n.GUID, Kind: n.Kind, Seq: n.Seq, Anchored: n.Anchored, Anchor: n.Anchor}
		}
	}
	return names
}

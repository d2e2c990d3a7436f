package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/group"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const membersUsage = `Usage: zkrecipes members [flags] GROUP

List the members of the group GROUP, sorted by id: ID, SINCE (the creation
revision of the member's current registration: ZooKeeper's czxid, etcd's
create revision; it changes when the member registers again) and DATA (what
the member registered with: zkrecipes register writes host:pid unless
--data is given). members only reads: it writes no znode or key. A group nobody
ever joined, or whose members are all gone, is listed as empty (exit 0).

The group service is the one --servers (or ZK_SERVERS) names:
  host:port,host:port[/chroot]           ZooKeeper: GROUP is a directory, e.g. /groups/workers
  etcd://host:2379[,host:2379][/prefix]  etcd: GROUP is a name with the lock names' rules
Membership works with ZooKeeper and etcd only.

Examples:
  zkrecipes members /groups/workers
  zkrecipes members --json /groups/workers | jq -r '.members[].id'
  zkrecipes members --watch /groups/workers        # follow changes until Ctrl-C
  zkrecipes members --servers etcd://e1:2379/myapp workers

Exit statuses: 0; 64 usage (also a backend other than ZooKeeper or etcd);
69 server unreachable or the connection lost; 70 other error (e.g. an ACL
refusal).
`

// membershipOnly is the usage error for a backend without group membership.
const membershipOnly = "membership works with ZooKeeper and etcd: see docs/backends.md#membership"

// groupFlags are the flags of members and register: the common ones and
// etcd's --ttl (register only; members keeps the default).
type groupFlags struct {
	common
	ttl time.Duration
}

// checkGroup checks the common flags, that the backend has membership, the
// flags that mean nothing for it, and the group's name; -1 when all is well,
// else the exit status (a usage error printed).
func (f *groupFlags) checkGroup(stderr io.Writer, fs *flag.FlagSet, name string) int {
	if err := f.check(); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if f.backend != zkBackend && f.backend != etcdBackend {
		return usageError(stderr, fs, "--servers names %s (%s): %s", f.backend, redact(f.servers), membershipOnly)
	}
	if err := checkBackendFlags(fs, f.backend); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if f.backend == zkBackend {
		return checkPath(stderr, fs, name)
	}
	if err := etcdlock.CheckName(name); err != nil {
		return usageError(stderr, fs, "invalid group name: %v", err)
	}
	return -1
}

// groupService is an open session of the group service, with the group on
// it.
type groupService struct {
	g recipe.Group
	// bound is how long a Leave may take: the session timeout or TTL.
	bound time.Duration
	// session names the current ZooKeeper session ("0x…"; "" on etcd).
	session func() string
	close   func()
}

// openGroup connects to the service of --servers (ZooKeeper or etcd) and
// returns the group name on it; on failure it logs and returns the exit
// status (-1 on success).
func (f *groupFlags) openGroup(ctx context.Context, log *slog.Logger, met *metricsServer, name string) (*groupService, int) {
	if f.backend == zkBackend {
		s, code := f.connect(ctx, log, met.option()...)
		if code >= 0 {
			return nil, code
		}
		g, err := group.New(s, name, group.WithLogger(log))
		if err != nil {
			s.Close()
			return nil, failStatus(log, "registration", err)
		}
		return &groupService{g: g, bound: s.SessionTimeout(), session: func() string { return fmt.Sprintf("0x%x", s.ID()) },
			close: func() { s.Close() }}, -1
	}
	cctx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	defer cancel()
	s, err := f.connectEtcd(cctx, log, f.ttl, etcdlock.WithMetrics(met.metrics()))
	if err != nil {
		return nil, connectStatus(log, f.backend, f.servers, err)
	}
	g, err := etcdlock.NewGroup(s, name)
	if err != nil {
		s.Close()
		return nil, failStatus(log, "registration", err)
	}
	return &groupService{g: g, bound: s.TTL(), session: func() string { return "" }, close: func() { s.Close() }}, -1
}

// connectEtcd opens an etcd Session on --servers with lease ttl and the
// TLS flags: what lock and the membership commands share.
func (c *common) connectEtcd(ctx context.Context, log *slog.Logger, ttl time.Duration, opts ...etcdlock.Option) (*etcdlock.Session, error) {
	return etcdlock.Connect(ctx, c.servers, c.tls.etcd(append([]etcdlock.Option{etcdlock.WithTTL(ttl),
		etcdlock.WithConnectTimeout(c.connectTimeout), etcdlock.WithLogger(log)}, opts...)...)...)
}

type membersFlags struct {
	groupFlags
	json  bool
	watch bool
}

func runMembers(args []string, stdout, stderr io.Writer) int {
	var f membersFlags
	f.ttl = defaultTTL
	fs := newFlagSet("members", membersUsage, stdout, stderr)
	f.register(fs, false, "warn")
	fs.Lookup("servers").Usage += "; or etcd://host:port[,host:port][/prefix]"
	fs.BoolVar(&f.json, "json", false, "print one JSON document (with --watch: one JSON line per change)")
	fs.BoolVar(&f.watch, "watch", false, "print again after every change, until SIGINT or SIGTERM")
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || cmd != nil {
		return usageError(stderr, fs, "want exactly one GROUP, got %q", append(pos, cmd...))
	}
	if code := f.checkGroup(stderr, fs, pos[0]); code >= 0 {
		return code
	}
	return membersMain(&f, pos[0], stdout, stderr)
}

// GroupView is what members prints: the JSON document, one per change
// with --watch.
type GroupView struct {
	Group   string        `json:"group"`
	Backend string        `json:"backend"`
	Rev     int64         `json:"rev"`
	At      time.Time     `json:"at"`
	Members []GroupMember `json:"members"`
}

// GroupMember is one member of a GroupView.
type GroupMember struct {
	ID    string `json:"id"`
	Data  string `json:"data"` // in hex when not UTF-8
	Since int64  `json:"since"`
}

func membersMain(f *membersFlags, name string, stdout, stderr io.Writer) int {
	log := f.logger(stderr).With("group", shortpath.Of(name), "backend", string(f.backend))
	ctx, met, end, code := startReadOnly(f.metricsAddr, log)
	if code >= 0 {
		return code
	}
	defer end()
	gs, code := f.openGroup(ctx, log, met, name)
	if code >= 0 {
		return code
	}
	defer gs.close()
	show := func(v recipe.View, first bool) {
		gv := groupView(name, f.backend, v)
		if f.json {
			enc := json.NewEncoder(jsonWriter{stdout}) // escapes what terminals obey
			if !f.watch {
				enc.SetIndent("", "  ")
			}
			enc.Encode(gv)
			return
		}
		printGroup(stdout, gv, f.watch && !first)
	}
	if !f.watch {
		v, err := gs.g.Members(ctx)
		if err != nil {
			return readStatus(ctx, log, err)
		}
		show(v, true)
		return 0
	}
	first := true
	for v := range gs.g.Watch(ctx) {
		show(v, first)
		first = false
	}
	if ctx.Err() != nil {
		return 0
	}
	// The watch ended for good (logged by the library): one more read says why.
	if _, err := gs.g.Members(ctx); err != nil {
		return readStatus(ctx, log, err)
	}
	log.Error("watching the group ended")
	return exitSoftware
}

// readStatus logs why reading the group failed and returns the exit
// status: 0 if interrupted, 69 for a server that cannot be reached or a
// connection or session lost, 70 for every other failure.
func readStatus(ctx context.Context, log *slog.Logger, err error) int {
	switch {
	case ctx.Err() != nil:
		return 0
	case errors.Is(err, recipe.ErrNoPermission):
		log.Error("reading the group failed: permission denied (with ZooKeeper: the directory's ACL; give credentials it grants, --auth-file or "+envAuth+")", "err", err)
		return exitSoftware
	case unavailable(err):
		log.Error("reading the group failed: the connection was lost", "err", err)
		return exitUnavailable
	}
	log.Error("reading the group failed", "err", err)
	return exitSoftware
}

// groupView is v as members prints it.
func groupView(name string, b backend, v recipe.View) GroupView {
	gv := GroupView{Group: name, Backend: string(b), Rev: v.Rev, At: time.Now(), Members: []GroupMember{}}
	for _, m := range v.Members {
		data := string(m.Data)
		if !utf8.Valid(m.Data) {
			data = fmt.Sprintf("%x", m.Data)
		}
		gv.Members = append(gv.Members, GroupMember{ID: m.ID, Data: data, Since: m.Since})
	}
	return gv
}

// printGroup prints v as a table (after an empty line with gap); ids, data
// and the group's name are escaped for the terminal (termSafe).
func printGroup(w io.Writer, v GroupView, gap bool) {
	if gap {
		fmt.Fprintln(w)
	}
	at := v.At.Format(time.RFC3339)
	if len(v.Members) == 0 {
		fmt.Fprintf(w, "%s: no members (rev %d, %s)\n", termSafe(v.Group), v.Rev, at)
		return
	}
	fmt.Fprintf(w, "%s: %d member(s) (rev %d, %s)\n", termSafe(v.Group), len(v.Members), v.Rev, at)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSINCE\tDATA")
	for _, m := range v.Members {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", termSafe(m.ID), m.Since, termSafe(m.Data))
	}
	tw.Flush()
}

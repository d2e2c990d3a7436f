// Command nemesis is the long run of the fault-injection suite (package
// testkit/nemesis) on one backend or on all of them (-backend zk, etcd, pg,
// redis, k8s or all; zk by default): it starts the backend's servers (for
// ZooKeeper a 3-server ensemble through zktest) and runs its recipes in
// turn (ZooKeeper: mutex, read-write lock, semaphore of two permits,
// election, leader latch; every backend: mutex, its Lock, leader,
// leader.Run over it, and multilock, a multi-lock over two of its Locks
// beside plain grants of one), one seeded run after another, each with its own
// fault phase, heal, recovery measurement, leak checks and history check,
// until the total duration has passed (per backend, with -backend all).
// Besides the in-process guard and the backend's own register, every
// fenced write also goes to a SQL register (fencesql.Do) in a throwaway
// PostgreSQL server started for the run (testkit/pgtest; PG_TEST_DSN
// names an existing server instead), or a SQLite file with -sql sqlite. It
// prints the servers, one line per run and the totals (with the margins:
// how long before the server let another client in the holder's context
// had ended). For a run with a violation it writes the history to a file
// of its own in -history-dir, keeps the servers' logs and data directories
// (both paths are printed), and starts the next run on fresh servers. It
// exits 1 if any run had a violation, or if a fault kind was tried and
// every attempt of it failed (a kind it could not inject was not tested;
// the totals say which), 130 when interrupted by SIGINT or SIGTERM before
// the duration passed (while the servers start too), 2 for bad flags (an
// unknown -faults kind among them, caught before any server starts).
//
// With -out DIR, every run gets a directory of its own in DIR
// (run<i>-<recipe>-seed<seed>, in DIR/<backend>/ with -backend all)
// holding its history (history.json) and its page (index.html, package
// testkit/nemesis/report: the check results and a timeline of leases,
// writes and faults, opened at the first violation), with porcupine's view
// of each register beside it.
//
// With -recipes members (zk and etcd, not in the default lists), a run is
// group membership instead of a lock recipe (nemesis.RunMembership): each
// client joins the group, updates its data, leaves and joins again and
// watches the group on its own session, and the checks are that every
// view was a real state of the group and that every watcher converged
// after the heal; the run's line and the totals give the views,
// registrations and convergence, and a run with a violation keeps its
// history (JSON) as a lock run does, but has no page.
//
// With -render FILE, it runs nothing: it reads a history written by a run
// (history.json, or the file of a run with a violation), checks it again
// and writes its page to -out. The checks that need the servers (leaks)
// are not in that page. A file that is truncated, from another version or
// inconsistent is refused with the reason (exit 1).
//
// Usage:
//
//	go run -race ./cmd/nemesis [-backend zk] [-duration 10m] [-seed 1] [-run 60s] [-clients 4] [-recipes mutex,rwlock,semaphore,election,latch,multilock] [-sql postgres|sqlite|none] [-out DIR]
//	go run ./cmd/nemesis -render history.json -out DIR
//
// New runs start until -duration has passed; the last one then finishes
// its fault phase (-run: 60 s, or -duration when that is shorter), heal
// and checks, so the command takes longer than -duration.
//
// Run i uses recipe i mod len(recipes) and seed -seed + i, so a run can be
// replayed alone with -seed <its seed> -recipes <its recipe> -duration 1s
// -run <its -run>.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	_ "modernc.org/sqlite" // "sqlite"
)

func main() {
	o, chosenBackends := parseFlags()
	if o.renderFile != "" {
		if err := render(o.renderFile, o.outDir, allRecipes()); err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
			os.Exit(1)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, what, closeDB, err := openSQL(ctx, o.sqlKind)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nemesis: the SQL register:", err)
		os.Exit(1)
	}
	defer closeDB()
	fmt.Printf("nemesis: SQL register: %s\n", what)
	code := 0
	for _, name := range chosenBackends {
		if ctx.Err() != nil {
			break
		}
		out := o.outDir
		if len(chosenBackends) > 1 && out != "" {
			out += "/" + name
		}
		c := runBackend(ctx, name, o, db, out)
		code = max(code, c)
	}
	closeDB()
	os.Exit(code)
}

// runBackend launches backend name's servers, runs its recipes on them for
// -duration, closes them, and returns the exit status of its runs.
func runBackend(ctx context.Context, name string, o options, db *sql.DB, outDir string) int {
	b := backends[name]
	var recipes []nemesis.Recipe
	for _, n := range strings.Split(firstOf(o.names, b.defaults), ",") {
		r, ok := b.recipes[strings.TrimSpace(n)]
		if !ok {
			fmt.Fprintf(os.Stderr, "nemesis: %s has no recipe %q (it has: %s)\n", name, n, strings.Join(sortedKeys(b.recipes), ", "))
			return 2
		}
		recipes = append(recipes, r)
	}
	launch := func() (*launched, error) { return b.launch(ctx, o) }
	l, err := launch()
	if err != nil {
		if ctx.Err() != nil { // not a missing install: the start was cut short
			fmt.Printf("interrupted (%v) while %s's servers started: no run\n", context.Cause(ctx), name)
			return 130
		}
		fmt.Fprintf(os.Stderr, "nemesis: %s: %v\n", name, err)
		return 1
	}
	if err := checkKinds(l.target, o.kinds); err != nil {
		fmt.Fprintf(os.Stderr, "nemesis: %v\n", err)
		l.close()
		return 2
	}
	s := &series{name: name, launch: launch, recipes: recipes, kinds: o.kinds, db: db, total: o.total, seed: o.seed,
		runFor: o.runFor, clients: o.clients, every: o.every, histDir: o.histDir, outDir: outDir}
	code := s.run(ctx, &l)
	if l != nil {
		if err := l.close(); err != nil {
			fmt.Fprintf(os.Stderr, "nemesis: closing %s's servers: %v\n", name, err)
		}
	}
	return code
}

// checkKinds refuses a fault kind t does not have.
func checkKinds(t nemesis.Target, kinds []string) error {
	known := nemesis.FaultNames(t)
	for _, k := range kinds {
		if !slices.Contains(known, k) {
			return fmt.Errorf("-faults: %s has no fault kind %q (it has: %s)", t.Name(), k, strings.Join(known, ", "))
		}
	}
	return nil
}

// options are the command's flags.
type options struct {
	total, runFor, every                                            time.Duration
	seed                                                            uint64
	clients, servers                                                int
	backend, names, faultList, histDir, outDir, renderFile, sqlKind string
	kinds                                                           []string
}

// parseFlags parses and checks the flags (a bad one exits with status 2),
// and returns them with the backends to run (none with -render, which
// runs nothing).
func parseFlags() (o options, chosenBackends []string) {
	flag.StringVar(&o.backend, "backend", "zk", "the backend to put under the nemesis: zk, etcd, pg, redis, k8s, or all (one after the other, each for -duration)")
	flag.DurationVar(&o.total, "duration", 10*time.Minute, "total time per backend: new runs start until it has passed (the last one then finishes its fault phase, heal and checks)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the first run (run i uses seed+i)")
	flag.DurationVar(&o.runFor, "run", 60*time.Second, "fault phase of each run (default 60s, or -duration if that is shorter)")
	flag.IntVar(&o.clients, "clients", 4, "clients per run, each with its own session")
	flag.IntVar(&o.servers, "ensemble", 3, "servers in the ZooKeeper ensemble (-backend zk or all only)")
	flag.StringVar(&o.names, "recipes", "", "recipes to run, in turn (default: zk mutex,rwlock,semaphore,election,latch,multilock; the others mutex,leader,multilock; zk and etcd also have members, group membership)")
	flag.DurationVar(&o.every, "fault-every", 600*time.Millisecond, "mean wait between two faults")
	flag.StringVar(&o.faultList, "faults", "", "fault kinds to inject, comma-separated (default: all the backend has)")
	flag.StringVar(&o.histDir, "history-dir", os.TempDir(), "where to write the history of a run with a violation")
	flag.StringVar(&o.outDir, "out", "", "write each run's history and page (timeline, check results, porcupine's views) to a directory of its own in this one")
	flag.StringVar(&o.renderFile, "render", "", "run nothing: check this history file again and write its page to -out")
	flag.StringVar(&o.sqlKind, "sql", "postgres", "the SQL register's database: postgres (a throwaway server, or PG_TEST_DSN), sqlite (a temporary file) or none")
	flag.Parse()
	o.runFor = faultPhase(o.runFor, o.total, flagSet("run"))
	usage := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "nemesis: "+format+"\n", args...)
		flag.Usage()
		os.Exit(2)
	}
	switch {
	case flag.NArg() > 0:
		usage("unexpected argument %q (flags only)", flag.Arg(0))
	case o.total <= 0 || o.runFor <= 0 || o.every <= 0:
		usage("-duration, -run and -fault-every must be positive")
	case o.clients <= 0:
		usage("-clients must be positive")
	case o.servers <= 0:
		usage("-ensemble must be positive")
	case o.renderFile != "" && o.outDir == "":
		usage("-render needs -out, the directory to write the page to")
	case o.sqlKind != "postgres" && o.sqlKind != "sqlite" && o.sqlKind != "none":
		usage("-sql must be postgres, sqlite or none")
	}
	if o.renderFile != "" {
		return o, nil
	}
	chosenBackends, err := chosen(o.backend)
	if err != nil {
		usage("%v", err)
	}
	for _, name := range chosenBackends {
		b := backends[name]
		for _, n := range strings.Split(firstOf(o.names, b.defaults), ",") {
			if _, ok := b.recipes[strings.TrimSpace(n)]; !ok {
				usage("%s has no recipe %q (it has: %s)", name, n, strings.Join(sortedKeys(b.recipes), ", "))
			}
		}
	}
	if o.faultList != "" {
		for _, k := range strings.Split(o.faultList, ",") {
			o.kinds = append(o.kinds, strings.TrimSpace(k))
		}
	}
	if err := (nemesis.Config{Faults: o.kinds}).Validate(); err != nil {
		usage("%v", err)
	}
	for _, name := range chosenBackends { // before any server starts
		if err := knownKinds(name, o.kinds); err != nil {
			usage("%v", err)
		}
	}
	if flagSet("ensemble") && !slices.Contains(chosenBackends, "zk") {
		usage("-ensemble is the size of ZooKeeper's ensemble: it needs -backend zk or all (etcd runs 3 members, pg and redis 1 server)")
	}
	return o, chosenBackends
}

// knownKinds refuses, before launching anything, a fault kind backend
// does not have (nemesis.BackendFaults: the generic kinds and its own).
func knownKinds(backend string, kinds []string) error {
	known, ok := nemesis.BackendFaults(backend)
	if !ok {
		return fmt.Errorf("backend %s has no list of fault kinds in package nemesis", backend)
	}
	for _, k := range kinds {
		if !slices.Contains(known, k) {
			return fmt.Errorf("-faults: %s has no fault kind %q (it has: %s)", backend, k, strings.Join(known, ", "))
		}
	}
	return nil
}

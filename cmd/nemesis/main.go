// Command nemesis is the long run of the fault-injection suite
// (package zktest/nemesis): it starts a 3-server ZooKeeper ensemble through
// zktest and runs the recipes in turn (mutex, read-write lock, semaphore of
// two permits, election, leader latch), one seeded run after another, each with its own
// fault phase, heal, recovery measurement, leak checks and history check,
// until the total duration has passed. Besides the in-process guard and the
// znode register, every fenced write also goes to a SQL register
// (fencesql.Do) in a throwaway PostgreSQL server started for the run
// (internal/pgtest; PG_TEST_DSN names an existing server instead), or a
// SQLite file with -sql sqlite. It prints the servers' version, one
// line per run and the totals. For a run with a violation it writes the
// history to a file of its own in -history-dir, keeps the servers' logs and
// data directories (both paths are printed), and starts the next run on a
// fresh ensemble. It exits 1 if any run had a violation (130 when
// interrupted by SIGINT or SIGTERM before the duration passed, 2 for bad
// flags).
//
// With -out DIR, every run gets a directory of its own in DIR
// (run<i>-<recipe>-seed<seed>) holding its history (history.json) and its
// page (index.html, package zktest/nemesis/report: the check results and a
// timeline of leases, writes and faults, opened at the first violation),
// with porcupine's view of each register beside it.
//
// With -render FILE, it runs nothing: it reads a history written by a run
// (history.json, or the file of a run with a violation), checks it again
// and writes its page to -out. The checks that need the servers (leaks)
// are not in that page. A file that is truncated, from another version or
// inconsistent is refused with the reason (exit 1).
//
// Usage:
//
//	go run -race ./cmd/nemesis [-duration 10m] [-seed 1] [-run 60s] [-clients 4] [-recipes mutex,rwlock,semaphore,election,latch] [-sql postgres|sqlite|none] [-out DIR]
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
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/zkrecipes/zkrecipes/internal/pgtest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis/report"
	_ "modernc.org/sqlite" // "sqlite"
)

func main() {
	o, all, recipes, kinds := parseFlags()
	if o.renderFile != "" {
		if err := render(o.renderFile, o.outDir, all); err != nil {
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
	launch := func() (*zktest.Cluster, error) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return zktest.Launch(lctx, zktest.WithEnsemble(o.servers))
	}
	cl, err := launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nemesis:", err)
		closeDB()
		os.Exit(1)
	}
	fmt.Printf("nemesis: SQL register: %s\n", what)
	code := run(ctx, &cl, launch, recipes, kinds, db, o.total, o.seed, o.runFor, o.clients, o.every, o.histDir, o.outDir)
	if cl != nil {
		if err := cl.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "nemesis: closing the ensemble:", err)
		}
	}
	closeDB()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	total, runFor, every                                   time.Duration
	seed                                                   uint64
	clients, servers                                       int
	names, faultList, histDir, outDir, renderFile, sqlKind string
}

// parseFlags parses and checks the flags (a bad one exits with status 2),
// and returns them with every known recipe, the recipes to run and the
// fault kinds (none with -render, which runs nothing).
func parseFlags() (o options, all map[string]nemesis.Recipe, recipes []nemesis.Recipe, kinds []string) {
	flag.DurationVar(&o.total, "duration", 10*time.Minute, "total time: new runs start until it has passed (the last one then finishes its fault phase, heal and checks)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the first run (run i uses seed+i)")
	flag.DurationVar(&o.runFor, "run", 60*time.Second, "fault phase of each run (default 60s, or -duration if that is shorter)")
	flag.IntVar(&o.clients, "clients", 4, "clients per run, each with its own session")
	flag.IntVar(&o.servers, "ensemble", 3, "servers in the ensemble")
	flag.StringVar(&o.names, "recipes", "mutex,rwlock,semaphore,election,latch", "recipes to run, in turn")
	flag.DurationVar(&o.every, "fault-every", 600*time.Millisecond, "mean wait between two faults")
	flag.StringVar(&o.faultList, "faults", "", "fault kinds to inject, comma-separated (default: all)")
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
	all = map[string]nemesis.Recipe{"mutex": nemesis.Mutex(), "rwlock": nemesis.RWLock(),
		"semaphore": nemesis.Semaphore(2), "election": nemesis.Election(), "latch": nemesis.Latch(),
		// not in the default list: a recipe that is wrong on purpose, to
		// see the command report a violation and keep the evidence
		"broken-mutex": nemesis.Broken()}
	for _, n := range strings.Split(o.names, ",") {
		r, ok := all[strings.TrimSpace(n)]
		if !ok {
			usage("unknown recipe %q (known: mutex, rwlock, semaphore, election, latch)", n)
		}
		recipes = append(recipes, r)
	}
	if o.renderFile != "" {
		return o, all, recipes, nil
	}
	if o.faultList != "" {
		for _, k := range strings.Split(o.faultList, ",") {
			kinds = append(kinds, strings.TrimSpace(k))
		}
	}
	if err := (nemesis.Config{Faults: kinds}).Validate(); err != nil {
		usage("%v", err)
	}
	return o, all, recipes, kinds
}

// openSQL opens the SQL register's database: kind "postgres" (a database of
// its own on a throwaway server, or on PG_TEST_DSN's), "sqlite" (a file in a
// temporary directory) or "none" (nil). closeDB, idempotent, removes what
// it made.
func openSQL(ctx context.Context, kind string) (db *sql.DB, what string, closeDB func(), err error) {
	switch kind {
	case "none":
		return nil, "none", func() {}, nil
	case "sqlite":
		dir, err := os.MkdirTemp("", "nemesis-sql-")
		if err != nil {
			return nil, "", nil, err
		}
		db, err := sql.Open("sqlite", filepath.Join(dir, "register.db"))
		if err != nil {
			os.RemoveAll(dir)
			return nil, "", nil, err
		}
		return db, "SQLite " + filepath.Join(dir, "register.db"), once(func() { db.Close(); os.RemoveAll(dir) }), nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Launch(sctx)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w (or -sql sqlite)", err)
	}
	dsn, err := srv.NewDatabase(sctx, "nemesis")
	if err == nil {
		db, err = sql.Open("pgx", dsn)
	}
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	var version string
	db.QueryRowContext(sctx, "SHOW server_version").Scan(&version)
	return db, "PostgreSQL " + version + " " + dsn, once(func() {
		db.Close()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.DropDatabase(dctx, dsn)
		srv.Close()
	}), nil
}

func once(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}

// run runs the recipes in turn on *cl. After a run with a violation the
// ensemble is closed (its directories kept) and a fresh one is launched for
// the next run: a server bug that made the replicas diverge (see
// docs/reliability.md) would otherwise carry over into later runs.
func run(ctx context.Context, clp **zktest.Cluster, launch func() (*zktest.Cluster, error), recipes []nemesis.Recipe, kinds []string,
	db *sql.DB, total time.Duration, seed uint64, runFor time.Duration, clients int, every time.Duration, histDir, outDir string) int {
	cl := *clp
	start := time.Now()
	var t tally
	fmt.Printf("nemesis: %d servers %s (ZooKeeper %s), %d clients, 2 s sessions, %v of faults per run, new runs for %v, first seed %d\n",
		len(cl.Addrs()), strings.Join(cl.Addrs(), ","), version(ctx, cl), clients, runFor, total, seed)
	for i := 0; time.Since(start) < total && ctx.Err() == nil; i++ {
		r := recipes[i%len(recipes)]
		s := seed + uint64(i)
		t0 := time.Now()
		res, err := nemesis.Run(ctx, cl, r, nemesis.Config{Clients: clients, Duration: runFor, Seed: s, FaultEvery: every, Faults: kinds, SQL: db,
			Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Printf("run %d %s seed %d: %v\n", i, r.Name, s, err)
			t.violations++
			continue
		}
		rep := res.Report
		t.add(r.Name, rep)
		fmt.Printf("run %d %s seed %d (%v): %s\n", i, r.Name, s, time.Since(t0).Round(time.Second), rep.Summary())
		if outDir != "" {
			dir := filepath.Join(outDir, fmt.Sprintf("run%d-%s-seed%d", i, r.Name, s))
			if err := writeRun(dir, res.History, rep); err != nil {
				fmt.Printf("  page NOT written: %v\n", err)
			} else {
				fmt.Printf("  page: %s\n", filepath.Join(dir, report.Page))
			}
		}
		for _, e := range rep.ExcusedExamples {
			fmt.Printf("  excused: %s\n", e)
		}
		if len(rep.Violations) > 0 {
			fmt.Printf("  VIOLATIONS (%s):\n    %s\n", keepEvidence(cl, res.History, histDir), strings.Join(rep.Violations, "\n    "))
			if time.Since(start) < total && ctx.Err() == nil {
				if err := cl.Close(); err != nil {
					fmt.Printf("  closing the ensemble: %v\n", err)
				}
				*clp = nil
				if cl, err = launch(); err != nil {
					fmt.Printf("  a fresh ensemble for the next runs: %v\n", err)
					t.violations++
					break
				}
				*clp = cl
				fmt.Printf("  next runs on a fresh ensemble: %s\n", strings.Join(cl.Addrs(), ","))
			}
		}
	}
	t.print(time.Since(start), recipes)
	switch {
	case t.violations > 0:
		return 1
	case ctx.Err() != nil:
		fmt.Printf("interrupted (%v): the figures cover the %d complete run(s) only\n", context.Cause(ctx), t.runs)
		return 130
	case t.runs == 0:
		return 1
	}
	return 0
}

// tally adds up the runs' reports.
type tally struct {
	runs, ops, grants, stale, violations, excused, writes, faultErrs int
	faults                                                           map[string]int
	perRecipe                                                        map[string]int
	maxRecovery                                                      time.Duration
}

// add counts a run of recipe with report rep.
func (t *tally) add(recipe string, rep *nemesis.Report) {
	if t.faults == nil {
		t.faults, t.perRecipe = map[string]int{}, map[string]int{}
	}
	t.runs++
	t.perRecipe[recipe]++
	t.ops += rep.Operations()
	t.grants += rep.Grants
	t.stale += rep.StaleRejected()
	t.excused += rep.Excused
	t.faultErrs += rep.FaultErrors
	t.violations += len(rep.Violations)
	for _, m := range rep.Writes {
		for _, c := range m {
			t.writes += c
		}
	}
	for k, c := range rep.Faults {
		t.faults[k] += c
	}
	t.maxRecovery = max(t.maxRecovery, rep.Recovery)
}

// print writes the totals, after took.
func (t *tally) print(took time.Duration, recipes []nemesis.Recipe) {
	seen := make([]string, 0, len(t.faults))
	nf := 0
	for k, c := range t.faults {
		seen = append(seen, k)
		nf += c
	}
	slices.Sort(seen)
	fmt.Printf("\ntotal: %v, %d runs (%s), %d operations (%d grants, %d register writes), %d stale writes rejected, %d excused samples, max recovery %v, %d violations\n",
		took.Round(time.Second), t.runs, counts(recipes, t.perRecipe), t.ops, t.grants, t.writes, t.stale, t.excused, t.maxRecovery.Round(time.Millisecond), t.violations)
	fmt.Printf("faults: %d attempted (%d failed or of uncertain effect)\n", nf, t.faultErrs)
	for _, k := range seen {
		fmt.Printf("  %-17s %d\n", k, t.faults[k])
	}
}

// faultPhase is each run's fault phase: -run if it was given (set), else
// its default capped at the total duration, so that a short -duration
// alone is a short command.
func faultPhase(run, total time.Duration, set bool) time.Duration {
	if set {
		return run
	}
	return min(run, total)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// counts writes the runs per recipe, "mutex 2, rwlock 1", in the order of
// recipes.
func counts(recipes []nemesis.Recipe, n map[string]int) string {
	var parts []string
	seen := map[string]bool{}
	for _, r := range recipes {
		if n[r.Name] > 0 && !seen[r.Name] {
			seen[r.Name] = true
			parts = append(parts, fmt.Sprintf("%s %d", r.Name, n[r.Name]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// placeholder is a build property left unexpanded in a version string
// (Debian's 3.8.0 reports "3.8.0-${mvngit.commit.id}").
var placeholder = regexp.MustCompile(`-?\$\{[^}]*\}`)

// cleanVersion is version line v without unexpanded build properties.
func cleanVersion(v string) string { return placeholder.ReplaceAllString(v, "") }

// version is the ZooKeeper version the first server that answers reports,
// without unexpanded build properties, or why none did.
func version(ctx context.Context, cl *zktest.Cluster) string {
	var errs []string
	for i := range cl.Addrs() {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := cl.ServerVersion(vctx, i)
		cancel()
		if err == nil {
			return cleanVersion(v)
		}
		errs = append(errs, err.Error())
	}
	return "version unknown: " + strings.Join(errs, "; ")
}

// keepEvidence writes the history of a run with a violation to a file of
// its own in dir and keeps the servers' directories (their logs, their
// transaction logs and snapshots) when the ensemble is closed. It says
// where both are, or why they are not.
func keepEvidence(cl *zktest.Cluster, h *nemesis.History, dir string) string {
	var parts []string
	f, err := writeHistory(h, dir)
	if err != nil {
		parts = append(parts, "history NOT written: "+err.Error())
	} else {
		parts = append(parts, "history in "+f)
	}
	if d := cl.KeepDirs(); d != "" {
		parts = append(parts, "server logs and data kept in "+d)
	} else {
		parts = append(parts, "no server directories to keep ("+cl.Provider()+" provider)")
	}
	return strings.Join(parts, "; ")
}

// writeHistory writes h to a new file in dir, named after the recipe, the
// seed and the time, so that a later run does not overwrite it.
func writeHistory(h *nemesis.History, dir string) (string, error) {
	name := fmt.Sprintf("nemesis-%s-seed%d-%s.json", h.Recipe, h.Seed, time.Now().UTC().Format("20060102T150405.000Z"))
	f := filepath.Join(dir, name)
	out, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	err = h.WriteJSON(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", f, err)
	}
	return f, nil
}

// writeRun writes a run's history (history.json) and its page into dir.
func writeRun(dir string, h *nemesis.History, rep *nemesis.Report) error {
	if err := report.Write(dir, h, rep); err != nil {
		return err
	}
	f := filepath.Join(dir, "history.json")
	out, err := os.Create(f)
	if err != nil {
		return err
	}
	err = h.WriteJSON(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", f, err)
	}
	return nil
}

// render checks the history in file again, with the rule of the recipe it
// names, and writes its page into dir.
func render(file, dir string, recipes map[string]nemesis.Recipe) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	h, err := nemesis.ReadHistory(in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	r, ok := recipes[h.Recipe]
	if !ok {
		return fmt.Errorf("reading %s: %w: unknown recipe %q", file, nemesis.ErrBadHistory, h.Recipe)
	}
	rep := nemesis.Check(h, r.Allowed)
	if err := report.Write(dir, h, rep); err != nil {
		return err
	}
	fmt.Printf("%s seed %d: %s\npage: %s\n", h.Recipe, h.Seed, rep.Summary(), filepath.Join(dir, report.Page))
	return nil
}

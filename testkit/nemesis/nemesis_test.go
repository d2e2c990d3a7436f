package nemesis_test

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	_ "modernc.org/sqlite" // the SQL register's database
)

func TestMain(m *testing.M) { zktest.Main(m) }

var (
	seed     = flag.Uint64("nemesis.seed", 1, "seed of the short nemesis runs")
	duration = flag.Duration("nemesis.duration", 5*time.Second, "fault phase of each short nemesis run")
)

// TestNemesis is the short seeded run of every recipe on one 3-server
// ensemble: servers killed, stopped, paused and restarted (the leader
// among them: one kind of server fault per recipe), clients cut, blackholed,
// slowed and paused, sessions expired on demand, the directory deleted,
// with four clients on 2 s sessions; then leader.Run over the same lock
// under the generic client faults, and a multi-lock over it and a second
// lock beside plain grants of it. Every kind of fault is tried at least
// once.
//
// On ZooKeeper 3.8.0 (Debian 12's, what CI installs) the short run pauses no
// server: after pauses that release can truncate committed transactions
// (docs/reliability.md, two findings), which the checker rightly reports but
// which is the server's bug, not ours, and would make the suite fail at
// random. The long run (make nemesis) and zktest's pause tests cover pauses;
// on any other version the short run pauses servers too.
//
// The SQL register is a SQLite file (four clients on one database through
// database/sql's pool); the long run writes to PostgreSQL.
func TestNemesis(t *testing.T) {
	cl := zktest.Start(t, zktest.WithEnsemble(3))
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "register.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
	version, err := cl.ServerVersion(vctx, 0)
	vcancel()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	serverKinds := nemesis.ServerFaults
	if strings.HasPrefix(version, "3.8.0") {
		serverKinds = slices.DeleteFunc(slices.Clone(serverKinds), func(k string) bool { return k == nemesis.FaultPauseServer })
		t.Logf("ZooKeeper %s: no %s in the short run (known data loss after pauses)", version, nemesis.FaultPauseServer)
	}
	var took nemtest.Kinds
	for i, r := range []nemesis.Recipe{nemesis.Mutex(), nemesis.RWLock(), nemesis.Semaphore(2), nemesis.Election(), nemesis.Latch()} {
		t.Run(r.Name, func(t *testing.T) {
			// Every client fault, and one kind of server fault per recipe;
			// each run starts with a tour of its kinds.
			kinds := append([]string{serverKinds[i%len(serverKinds)]}, nemesis.ClientFaults...)
			rep := runAndCheck(t, cl, r, nemesis.Config{Seed: *seed + uint64(i), Duration: *duration,
				FaultEvery: 400 * time.Millisecond, Faults: kinds, SQL: db})
			took.Add(rep)
			if r.Name != "semaphore" && rep.Writes[nemesis.RegSQL][nemesis.Accepted] == 0 {
				t.Errorf("no write accepted by the SQL register: %s", rep.Summary())
			}
		})
	}
	// leader.Run over ZooKeeper's Client.Lock (the recipe every backend
	// runs), shorter: its lock is the mutex above.
	t.Run("leader", func(t *testing.T) {
		runAndCheck(t, cl, nemesis.LeaderRecipe(), nemesis.Config{Seed: *seed + 5, Duration: *duration * 3 / 5,
			FaultEvery: 400 * time.Millisecond, Faults: nemesis.GenericFaults})
	})
	// A multi-lock over two of Client.Lock's locks beside plain grants of
	// one (the recipe every backend runs), with the next server fault kind.
	t.Run("multilock", func(t *testing.T) {
		kinds := append([]string{serverKinds[9%len(serverKinds)]}, nemesis.GenericFaults...)
		took.Add(runAndCheck(t, cl, nemesis.MultiLockRecipe(), nemesis.Config{Seed: *seed + 9, Duration: *duration * 3 / 5,
			FaultEvery: 400 * time.Millisecond, Faults: kinds}))
	})
	// The semaphore whose limit is stored with it (half its grants by
	// OpenSemaphore), shorter: its engine is the semaphore's above.
	t.Run("stored-semaphore", func(t *testing.T) {
		kinds := append([]string{serverKinds[10%len(serverKinds)]}, nemesis.ClientFaults...)
		took.Add(runAndCheck(t, cl, nemesis.StoredSemaphore(2), nemesis.Config{Seed: *seed + 10, Duration: *duration * 3 / 5,
			FaultEvery: 400 * time.Millisecond, Faults: kinds}))
	})
	// Group membership (recipe.Group), with the next server fault kind.
	t.Run("members", func(t *testing.T) {
		took.Add(runMembership(t, cl, *seed+6, serverKinds[6%len(serverKinds)]))
	})
	// Caches (cache.Cache), with the next server fault kind.
	t.Run("caches", func(t *testing.T) {
		took.Add(runCaches(t, cl, *seed+7, serverKinds[7%len(serverKinds)]))
	})
	// Shared values (value.New) as a compare-and-set register, with the
	// next server fault kind.
	t.Run("values", func(t *testing.T) {
		took.Add(runValues(t, cl, *seed+8, serverKinds[8%len(serverKinds)]))
	})
	took.Require(t, append(slices.Clone(serverKinds), nemesis.ClientFaults...)...)
}

// runAndCheck is nemtest.Run on ZooKeeper's target for cl (what
// nemesis.Run does, with Config.SessionTimeout's default of 2 s), plus
// what only ZooKeeper's runs check: where cl kept the servers' logs and
// data when the run broke an invariant, and the run's page (checkPage).
func runAndCheck(t *testing.T, cl *zktest.Cluster, r nemesis.Recipe, cfg nemesis.Config) *nemesis.Report {
	t.Helper()
	tg := nemesis.ZooKeeperTarget(cl)
	defer tg.Close()
	res := nemtest.Run(t, tg, r, cfg, "")
	if len(res.Report.Violations) > 0 {
		if d := cl.KeepDirs(); d != "" {
			t.Logf("%s seed %d: server logs and data kept in %s", r.Name, cfg.Seed, d)
		}
	}
	checkPage(t, res)
	return res.Report
}

// checkPage writes the run's page (package report) and checks that it
// shows what the run did: a lane per client, a lease per grant, a mark per
// register write, a band per fault, every violation marked and the page
// opening at the first; and that its history reads back (ReadHistory's
// consistency checks accept what a run records). It returns the page.
func checkPage(t *testing.T, res *nemesis.Result) string {
	t.Helper()
	dir := t.TempDir()
	var js bytes.Buffer
	if err := res.History.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if _, err := nemesis.ReadHistory(&js); err != nil {
		t.Errorf("the run's history does not read back: %v", err)
	}
	if err := report.Write(dir, res.History, res.Report); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, report.Page))
	if err != nil {
		t.Fatal(err)
	}
	page, h := string(b), res.History
	writes := 0
	for _, o := range h.Ops {
		if o.Kind == nemesis.OpWrite {
			writes++
		}
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"client lanes", strings.Count(page, `<g class="lane">`), h.Clients},
		{"leases", strings.Count(page, `class="lease `), len(h.Grants)},
		{"write marks", strings.Count(page, `class="w `), writes},
		{"fault bands", strings.Count(page, `class="band `), len(h.Faults)},
		{"porcupine views linked", strings.Count(page, `<a href="porcupine-`), len(nemesis.Registers(h))},
	} {
		if c.got != c.want {
			t.Errorf("the page has %d %s, want %d", c.got, c.what, c.want)
		}
	}
	for k := range res.Report.Faults {
		if !strings.Contains(page, `class="band `+k+`"`) {
			t.Errorf("the page shows no %s", k)
		}
	}
	whole := fmt.Sprintf(`data-view="0-%.3f"`, h.End.Seconds()*1.01)
	if located := slices.ContainsFunc(res.Report.Where, nemesis.Span.Known); located == strings.Contains(page, whole) ||
		located != strings.Contains(page, `class="viol"`) {
		t.Errorf("violations located: %t; the page shows the whole run: %t, marks a violation: %t",
			located, strings.Contains(page, whole), strings.Contains(page, `class="viol"`))
	}
	return page
}

// TestNemesisCatchesABrokenRecipe runs the whole suite against a recipe
// that is wrong on purpose (a semaphore of two permits posing as a mutex):
// the checker must report two live holders.
func TestNemesisCatchesABrokenRecipe(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := nemesis.Run(ctx, cl, nemesis.Broken(), nemesis.Config{Seed: 1, Duration: 3 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broken recipe: %s", res.Report.Summary())
	if page := checkPage(t, res); !strings.Contains(page, "lease contexts live at once") || !strings.Contains(page, `class="t viol"`) {
		t.Error("the page does not show the two live holders")
	}
	found := false
	for _, v := range res.Report.Violations {
		if strings.Contains(v, "lease contexts live at once") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the checker did not catch two live holders of a mutex; violations: %q", res.Report.Violations)
	}
}

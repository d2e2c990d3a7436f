package fencesql_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// docScript returns the cron job of docs/cli.md that passes
// $ZKRECIPES_TOKEN to psql, exactly as printed there.
func docScript(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```sh\n#!/bin/sh\n# nightly.sh")
	script, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/cli.md has no ```sh block starting with #!/bin/sh and # nightly.sh")
	}
	return "#!/bin/sh\n# nightly.sh" + script
}

// TestCLIDocPsqlFencing runs the psql cron job of docs/cli.md as a job run
// by `zkrecipes lock` would: with the token in ZKRECIPES_TOKEN. A newer
// token writes, an older one exits 3 and changes nothing, and the fence row
// it shares with fencesql refuses a Go writer with an older token too.
func TestCLIDocPsqlFencing(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatalf("no psql (%v): %s", err, pgtest.InstallHint)
	}
	t.Logf("psql: %s", psql)
	dsn := pgtest.Shared(t).Database(t)
	db := openPostgresDSN(t, dsn)
	newFence(t, db)
	mustExec(t, db, "CREATE TABLE sales (day DATE NOT NULL, amount BIGINT NOT NULL)",
		"CREATE TABLE daily_totals (day DATE PRIMARY KEY, total BIGINT NOT NULL)",
		"INSERT INTO sales VALUES (current_date, 5), (current_date, 7)")
	script := filepath.Join(t.TempDir(), "nightly.sh")
	if err := os.WriteFile(script, []byte(docScript(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(token string) (int, string) {
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "ZKRECIPES_TOKEN="+token)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}
	total := func() int64 {
		var n int64
		if err := db.QueryRow("SELECT coalesce(sum(total), 0) FROM daily_totals").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if code, out := run("4294967301"); code != 0 || total() != 12 {
		t.Fatalf("token 4294967301: exit %d, total %d: %s", code, total(), out)
	}
	mustExec(t, db, "INSERT INTO sales VALUES (current_date, 30)")
	code, out := run("4294967300")
	if code != 3 || !strings.Contains(out, "no rows returned for \\gset") || total() != 12 {
		t.Fatalf("stale token: exit %d, total %d: %s", code, total(), out)
	}
	t.Logf("stale token: exit %d: %s", code, strings.TrimSpace(out))
	if code, out := run("4294967301"); code != 0 || total() != 42 {
		t.Fatalf("equal token: exit %d, total %d: %s", code, total(), out)
	}
	err = fencesql.Do(ctxT(t), db, "nightly-report", 4294967299, nil)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != 4294967301 {
		t.Fatalf("a Go writer on the shell job's fence row: %v", err)
	}
}

// TestCLIDocPsqlHijack runs docs/cli.md's psql job as an ordinary role
// whose search_path lists public first, after another role planted, in
// public, copies of every operator and function the script could call
// (pgtest.PlantHijack): none runs, and the fence still refuses a stale
// token.
func TestCLIDocPsqlHijack(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("no psql (%v): %s", err, pgtest.InstallHint)
	}
	r := newPgRoles(t)
	mustExec(t, r.admin, "GRANT CREATE ON SCHEMA public TO PUBLIC")
	app := r.asDefault(t, r.app)
	f := newFence(t, app)
	mustExec(t, app, "CREATE TABLE public.sales (day DATE NOT NULL, amount BIGINT NOT NULL)",
		"CREATE TABLE public.daily_totals (day DATE PRIMARY KEY, total BIGINT NOT NULL)",
		"INSERT INTO public.sales VALUES (current_date, 5)")
	malloryDSN, err := pgtest.AsRole(r.dsn, r.mallory)
	if err != nil {
		t.Fatal(err)
	}
	h := pgtest.PlantHijack(t, malloryDSN)
	appDSN, err := pgtest.AsRole(r.dsn, r.app)
	if err != nil {
		t.Fatal(err)
	}
	dsn := appDSN + "&options=-csearch_path%3Dpublic%2Cpg_catalog" // libpq's spelling
	script := filepath.Join(t.TempDir(), "nightly.sh")
	if err := os.WriteFile(script, []byte(docScript(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		exit  int
	}{{"10", 0}, {"10", 0}, {"7", 3}} {
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "ZKRECIPES_TOKEN="+c.token)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.exit {
			t.Fatalf("token %s: exit %d, want %d: %s", c.token, code, c.exit, out)
		}
	}
	if n, what := h.Hits(t); n != 0 {
		t.Fatalf("the script ran %d planted objects: %v", n, what)
	}
	if high, err := f.Highest(ctxT(t), "nightly-report"); err != nil || high != 10 {
		t.Fatalf("fence row after the runs: %d, %v (want 10)", high, err)
	}
}

package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", for fencesql

	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestDocPsqlJobPassword (issue 37 item 8): docs/cli.md's psql fencing
// job, run as written under `zkrecipes lock --wait 0 PATH -- ./nightly.sh`
// with its password in PGPASSWORD. Under a ZooKeeper, etcd or Redis lock
// zkrecipes never reads PGPASSWORD: it is the job's, and the job gets it
// and writes. Under a PostgreSQL lock it is the lock's credential: it is
// withheld, which the INFO log says by name (never the value), and
// --pass-env PGPASSWORD gives it to the job.
func TestDocPsqlJobPassword(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("no psql (%v): %s", err, pgtest.InstallHint)
	}
	ps := pgtest.Shared(t)
	servers := map[string]func(t *testing.T) string{
		"ZooKeeper": func(t *testing.T) string { return strings.Join(zktest.Shared(t).Servers(), ",") },
	}
	for _, ls := range lockServers {
		servers[ls.name] = func(t *testing.T) string { u, addr := ls.start(t); return u(addr) }
	}
	for name, lockURL := range servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const pw = "s3cr3t-zkr-psql-job"
			job := psqlJob(t, ps, pw)
			env := append(job.env, "ZK_SERVERS="+lockURL(t), "PGPASSWORD="+pw)
			p := startEnv(t, env, job.dir, false, "lock", "--wait", "0", lockName(t), "--", "./nightly.sh")
			if name != string(pgBackend) {
				p.expect(0, 60*time.Second)
				job.wrote(t, 12)
				if r := p.logged(withheldMsg); r == nil || strings.Contains(fmt.Sprint(r["vars"]), "PGPASSWORD") {
					t.Errorf("the log does not name ZK_SERVERS alone as withheld: %v", r)
				}
				return
			}
			if code := p.wait(60 * time.Second); code == 0 {
				t.Fatalf("the job ran with PGPASSWORD under a PostgreSQL lock, without --pass-env")
			}
			r := p.logged(withheldMsg)
			if r == nil || !strings.Contains(fmt.Sprint(r["vars"]), "PGPASSWORD") || r["level"] != "INFO" {
				t.Errorf("no INFO log naming PGPASSWORD as withheld: %v", r)
			}
			job.wrote(t, 0)
			startEnv(t, env, job.dir, false, "lock", "--pass-env", "PGPASSWORD", "--wait", "0", lockName(t), "--", "./nightly.sh").expect(0, 60*time.Second)
			job.wrote(t, 12)
		})
	}
}

// psqlEnv is docs/cli.md's psql job, ready to run: its script, its tables
// in a database of its own, and a role that logs in with a password only.
type psqlEnv struct {
	dir string
	env []string // DATABASE_URL, without the password
	db  *sql.DB  // the database's administrator
}

// psqlJob writes docs/cli.md's nightly.sh into a directory, creates its
// tables (fencesql's included) and a role of password pw that may write
// them.
func psqlJob(t *testing.T, ps *pgtest.Server, pw string) *psqlEnv {
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
	j := &psqlEnv{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(j.dir, "nightly.sh"), []byte("#!/bin/sh\n# nightly.sh"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	dsn := ps.Database(t)
	role := ps.PasswordRole(t, dsn, pw)
	u, err := url.Parse(role)
	if err != nil {
		t.Fatal(err)
	}
	j.env = []string{"DATABASE_URL=" + role}
	if j.db, err = sql.Open("pgx", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fencesql.CreateTable(ctx, j.db); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE TABLE public.sales (day DATE NOT NULL, amount BIGINT NOT NULL)",
		"CREATE TABLE public.daily_totals (day DATE PRIMARY KEY, total BIGINT NOT NULL)",
		"INSERT INTO public.sales VALUES (current_date, 5), (current_date, 7)",
		"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO " + u.User.Username(),
	} {
		if _, err := j.db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return j
}

// wrote checks the job's total.
func (j *psqlEnv) wrote(t *testing.T, want int64) {
	t.Helper()
	var n int64
	if err := j.db.QueryRow("SELECT coalesce(sum(total), 0) FROM public.daily_totals").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("the job's total is %d, want %d", n, want)
	}
}

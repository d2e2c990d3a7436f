package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// secretEnv are the variables zkrecipes reads that may hold a secret: the
// server list (a Redis or PostgreSQL URL with its password), ZooKeeper's
// digest credentials, and the passwords the PostgreSQL driver takes from
// the environment as libpq does (pgEnv). The command and the guard process
// get none of them unless --pass-env names them, or (pgEnv) the lock
// service is not PostgreSQL: a job should not see the lock service's
// credentials, nor hand them to everything it runs.
var secretEnv = []string{envServers, envAuth, "PGPASSWORD", "PGSSLPASSWORD"}

// pgEnv are the variables of secretEnv that only the PostgreSQL driver
// reads. With another lock service zkrecipes never reads them: they are
// the job's own (a psql fencing its writes, docs/cli.md), and passed.
var pgEnv = []string{"PGPASSWORD", "PGSSLPASSWORD"}

// keepFor adds to p the variables of secretEnv that the lock service b
// does not use, which the command then gets: pgEnv unless b is
// PostgreSQL.
func (p *passEnv) keepFor(b backend) {
	if b == pgBackend {
		return
	}
	for _, name := range pgEnv {
		if !slices.Contains(*p, name) {
			*p = append(*p, name)
		}
	}
}

// withheldMsg is logWithheld's message.
const withheldMsg = "withheld from the command: the lock service's credentials (--pass-env NAME gives it one)"

// logWithheld logs at INFO the names (never the values) of the non-empty
// variables of zkrecipes' environment that childEnv withholds from the
// command, so that a job that misses one is told why and how to get it.
func logWithheld(log *slog.Logger, keep passEnv) {
	var names []string
	for _, name := range secretEnv {
		if os.Getenv(name) != "" && !slices.Contains(keep, name) {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		log.Info(withheldMsg, "vars", names)
	}
}

// passEnv is --pass-env: the variables of secretEnv the command gets all
// the same.
type passEnv []string

func (p *passEnv) String() string { return strings.Join(*p, ",") }

// Set takes a comma-separated list of names from secretEnv; the flag may
// be repeated.
func (p *passEnv) Set(s string) error {
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(secretEnv, name) {
			return fmt.Errorf("%q is not withheld from the command (only %s are; every other variable is passed)",
				name, strings.Join(secretEnv, ", "))
		}
		*p = append(*p, name)
	}
	return nil
}

// childEnv returns environ without the variables of secretEnv that keep
// does not name, followed by extra (which comes last: it wins over a
// variable of the same name).
func childEnv(environ []string, keep passEnv, extra ...string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(secretEnv, name) && !slices.Contains(keep, name) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

package main

import (
	"fmt"
	"slices"
	"strings"
)

// secretEnv are the variables zkrecipes reads that may hold a secret: the
// server list (a Redis or PostgreSQL URL with its password), ZooKeeper's
// digest credentials, and the passwords the PostgreSQL driver takes from
// the environment as libpq does. The command and the guard process get
// none of them unless --pass-env names them: a job should not see the lock
// service's credentials, nor hand them to everything it runs.
var secretEnv = []string{envServers, envAuth, "PGPASSWORD", "PGSSLPASSWORD"}

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

package main

import (
	"strings"
	"testing"
	"time"
)

// TestNearMissScheme (issue 37 item 11): a server list that begins with a
// scheme and a mistyped "://" ("postgresql//", "etcd:/") is a usage error
// naming the backend meant and the separator to write, at once, without
// quoting the rest (a password); it was read as ZooKeeper hosts (a host
// named "postgresql", with a chroot), logged as such, and failed 69.
func TestNearMissScheme(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ servers, says string }{
		{"postgresql//app:s3cr3t-zkr-near@127.0.0.1:1/db", `begins with "postgresql//": for PostgreSQL, write "postgresql://"`},
		{"postgres:/app@127.0.0.1:1/db", `begins with "postgres:/": for PostgreSQL, write "postgres://"`},
		{"etcd:/127.0.0.1:1/app", `begins with "etcd:/": for etcd, write "etcd://"`},
		{"Rediss//:s3cr3t-zkr-near@127.0.0.1:1", `begins with "Rediss//:": for Redis, write "Rediss://"`},
		{"k8s:/", `begins with "k8s:/": for Kubernetes, write "k8s://"`},
	} {
		// In ZK_SERVERS: a failure's dump of the arguments shows no password.
		p := startOn(t, c.servers, dir, "lock", "--connect-timeout", "2s", "/near/x", "--", "true")
		p.expect(exitUsage, 30*time.Second)
		out := p.stderr.String()
		if !strings.Contains(out, c.says) || strings.Contains(out, "s3cr3t-zkr-") || strings.Contains(out, "ZooKeeper's default port") {
			t.Errorf("--servers %q: want a usage error saying %q, without the password or a ZooKeeper log line:\n%s", c.servers, c.says, out)
		}
	}
}

// TestNearSchemeZooKeeperHosts: a ZooKeeper host named like a scheme is
// still one (a port, a chroot), and so are plain lists.
func TestNearSchemeZooKeeperHosts(t *testing.T) {
	for _, s := range []string{"redis:2181", "etcd/app", "postgres", "k8s:2181,zk2:2181/x", "zk1:2181", "postgresqlx//a", "redis:"} {
		if b, err := backendOf(s); err != nil || b != zkBackend {
			t.Errorf("backendOf(%q) = %v, %v; want ZooKeeper", s, b, err)
		}
	}
}

// TestHelpNamesEveryScheme (issue 37 item 12): `zkrecipes --help` names
// every scheme --servers takes, k8s:// included.
func TestHelpNamesEveryScheme(t *testing.T) {
	t.Parallel()
	p := start(t, nil, t.TempDir(), "--help")
	p.expect(0, 30*time.Second)
	for _, sch := range []string{"etcd://", "postgres://", "redis://", "k8s://"} {
		if !strings.Contains(p.stdout.String(), sch) {
			t.Errorf("zkrecipes --help does not name %s:\n%s", sch, p.stdout)
		}
	}
}

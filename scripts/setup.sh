#!/usr/bin/env bash
# Installs what the demo and the tests need, if missing: a Java runtime and
# ZooKeeper (Debian packages default-jre-headless and zookeeper),
# PostgreSQL's server binaries (postgresql) for the fencing helpers' and
# backend/pglock's tests, and PgBouncer (pgbouncer) for backend/pglock's.
# Idempotent: does nothing when all are present. Go itself must already be
# installed.
set -euo pipefail

have_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }
have_zookeeper() {
  [ -f /usr/share/java/zookeeper.jar ] || compgen -G "${ZOOKEEPER_HOME:-/nonexistent}/lib/zookeeper-*.jar" >/dev/null
}

have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; }
have_pgbouncer() { [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1; }

# What is missing, as Debian packages. An existing ensemble needs no
# ZooKeeper: ZK_SERVERS (demo) or ZK_TEST_SERVERS (tests); an existing
# PostgreSQL needs no server: PG_TEST_DSN.
pkgs=()
if [ -z "${ZK_TEST_SERVERS:-}" ] && [ -z "${ZK_SERVERS:-}" ] && ! { have_java && have_zookeeper; }; then
  pkgs+=(zookeeper default-jre-headless)
fi
if [ -z "${PG_TEST_DSN:-}" ] && ! have_postgres; then
  pkgs+=(postgresql)
fi
# backend/pglock's pooler test runs a PgBouncer of its own, also in front of
# an existing server.
if ! have_pgbouncer; then
  pkgs+=(pgbouncer)
fi
[ ${#pkgs[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing ${pkgs[*]} and this is not a Debian/Ubuntu machine." >&2
  echo "setup: install them (for ZooKeeper you may set ZOOKEEPER_HOME), or set ZK_TEST_SERVERS=host:port / PG_TEST_DSN." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing ${pkgs[*]}; run as root, or install them yourself:" >&2
    echo "setup:   apt-get install -y ${pkgs[*]}" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "setup: installing ${pkgs[*]} from Debian packages..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
echo "setup: done" >&2

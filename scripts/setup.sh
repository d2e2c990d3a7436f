#!/usr/bin/env bash
# Installs what the demo and the tests need, if missing, from Debian
# packages: a Java runtime and ZooKeeper (default-jre-headless, zookeeper),
# and a JDK (default-jdk-headless: testkit/zktest.WithSeqCounters runs a Java source
# file, which needs the jdk.compiler module);
# PostgreSQL's server binaries (postgresql) for the fencing helpers' and
# backend/pglock's tests, and PgBouncer (pgbouncer) for backend/pglock's;
# redis-server for backend/redislock's; etcd (etcd-server) for
# backend/etcdlock's. Idempotent: does nothing when all are
# present. Go itself must already be installed.
set -euo pipefail

have_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }
have_zookeeper() {
  [ -f /usr/share/java/zookeeper.jar ] || compgen -G "${ZOOKEEPER_HOME:-/nonexistent}/lib/zookeeper-*.jar" >/dev/null
}
# A JDK: the java that testkit/zktest runs ($JAVA_HOME/bin/java, else PATH's) has
# the jdk.compiler module.
have_jdk() {
  local java=java
  [ -n "${JAVA_HOME:-}" ] && java=$JAVA_HOME/bin/java
  "$java" --list-modules 2>/dev/null | grep -q '^jdk\.compiler@'
}
have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; }
# etcd: ETCD_TEST_ENDPOINTS names a running server, ETCD_BIN a binary.
have_etcd() { [ -n "${ETCD_TEST_ENDPOINTS:-}" ] || [ -x "${ETCD_BIN:-/nonexistent}" ] || command -v etcd >/dev/null 2>&1; }
have_pgbouncer() { [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1; }

# The Debian packages still missing. An existing server needs nothing
# installed: ZK_SERVERS (demo) or ZK_TEST_SERVERS (tests) for ZooKeeper,
# PG_TEST_DSN for PostgreSQL, REDIS_TEST_ADDR for Redis, ETCD_TEST_ENDPOINTS
# (or ETCD_BIN, a binary) for etcd.
pkgs=()
if [ -z "${ZK_TEST_SERVERS:-}" ] && [ -z "${ZK_SERVERS:-}" ] && ! { have_java && have_zookeeper; }; then
  pkgs+=(zookeeper default-jre-headless)
fi
# testkit/zktest's seeded servers (WithSeqCounters) are local ones, whatever
# ZK_TEST_SERVERS says.
if ! have_jdk; then
  pkgs+=(default-jdk-headless)
fi
if [ -z "${PG_TEST_DSN:-}" ] && ! have_postgres; then
  pkgs+=(postgresql)
fi
# backend/pglock's pooler test runs a PgBouncer of its own, also in front of
# an existing server.
if ! have_pgbouncer; then
  pkgs+=(pgbouncer)
fi
if [ -z "${REDIS_TEST_ADDR:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  pkgs+=(redis-server)
fi
have_etcd || pkgs+=(etcd-server)
[ ${#pkgs[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing: ${pkgs[*]}, and this is not a Debian/Ubuntu machine." >&2
  echo "setup: install them (for ZooKeeper you may set ZOOKEEPER_HOME), or point the tests at servers:" >&2
  echo "setup: ZK_TEST_SERVERS=host:port, PG_TEST_DSN=postgres://..., REDIS_TEST_ADDR=host:port,"  >&2
  echo "setup: ETCD_TEST_ENDPOINTS=host:port." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing: ${pkgs[*]}; run as root, or install them yourself:" >&2
    echo "setup:   apt-get install -y ${pkgs[*]}" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "setup: installing ${pkgs[*]} from Debian packages..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
echo "setup: done" >&2

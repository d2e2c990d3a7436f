#!/usr/bin/env bash
# Installs what the demo and the tests need, if missing: a Java runtime and
# ZooKeeper (Debian packages default-jre-headless and zookeeper), and etcd
# (Debian package etcd-server) for backend/etcdlock's tests. Idempotent: does
# nothing when all are present. Go itself must already be installed.
set -euo pipefail

have_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }
have_zookeeper() {
  [ -f /usr/share/java/zookeeper.jar ] || compgen -G "${ZOOKEEPER_HOME:-/nonexistent}/lib/zookeeper-*.jar" >/dev/null
}
# etcd: ETCD_TEST_ENDPOINTS names a running server, ETCD_BIN a binary.
have_etcd() { [ -n "${ETCD_TEST_ENDPOINTS:-}" ] || [ -x "${ETCD_BIN:-/nonexistent}" ] || command -v etcd >/dev/null 2>&1; }

pkgs=()
# An existing ensemble needs nothing installed: ZK_TEST_SERVERS (tests) or
# ZK_SERVERS (demo).
if ! { [ -n "${ZK_TEST_SERVERS:-}" ] || [ -n "${ZK_SERVERS:-}" ] || { have_java && have_zookeeper; }; }; then
  pkgs+=(zookeeper default-jre-headless)
fi
have_etcd || pkgs+=(etcd-server)
if [ ${#pkgs[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing: ${pkgs[*]}, and this is not a Debian/Ubuntu machine." >&2
  echo "setup: install a Java runtime and ZooKeeper (set ZOOKEEPER_HOME) and etcd (set ETCD_BIN)," >&2
  echo "setup: or set ZK_TEST_SERVERS=host:port and ETCD_TEST_ENDPOINTS=host:port." >&2
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

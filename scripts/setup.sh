#!/usr/bin/env bash
# Installs what the demo and the tests need, if missing: a Java runtime and
# ZooKeeper (Debian packages default-jre-headless and zookeeper), and
# redis-server for the Redis backend's tests. Idempotent: does nothing when
# all are present. Go itself must already be installed.
set -euo pipefail

have_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }
have_zookeeper() {
  [ -f /usr/share/java/zookeeper.jar ] || compgen -G "${ZOOKEEPER_HOME:-/nonexistent}/lib/zookeeper-*.jar" >/dev/null
}

# The Debian packages still missing. An existing server needs nothing
# installed: ZK_SERVERS (demo) or ZK_TEST_SERVERS (tests) for ZooKeeper,
# REDIS_TEST_ADDR for Redis.
pkgs=()
if [ -z "${ZK_TEST_SERVERS:-}" ] && [ -z "${ZK_SERVERS:-}" ] && ! { have_java && have_zookeeper; }; then
  pkgs+=(zookeeper default-jre-headless)
fi
if [ -z "${REDIS_TEST_ADDR:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  pkgs+=(redis-server)
fi
if [ ${#pkgs[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing: ${pkgs[*]}, and this is not a Debian/Ubuntu machine." >&2
  echo "setup: install a Java runtime and ZooKeeper (set ZOOKEEPER_HOME) and redis-server," >&2
  echo "setup: or point the tests at servers: ZK_TEST_SERVERS=host:port, REDIS_TEST_ADDR=host:port." >&2
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

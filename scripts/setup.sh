#!/usr/bin/env bash
# Installs what the demo and the tests need, if missing: a Java runtime and
# ZooKeeper (Debian packages default-jre-headless and zookeeper). Idempotent:
# does nothing when both are present. Go itself must already be installed.
set -euo pipefail

have_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }
have_zookeeper() {
  [ -f /usr/share/java/zookeeper.jar ] || compgen -G "${ZOOKEEPER_HOME:-/nonexistent}/lib/zookeeper-*.jar" >/dev/null
}

# An existing ensemble needs nothing installed: ZK_SERVERS (demo) or
# ZK_TEST_SERVERS (tests).
if [ -n "${ZK_TEST_SERVERS:-}" ] || [ -n "${ZK_SERVERS:-}" ] || { have_java && have_zookeeper; }; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: ZooKeeper or Java is missing and this is not a Debian/Ubuntu machine." >&2
  echo "setup: install a Java runtime and ZooKeeper (set ZOOKEEPER_HOME), or set ZK_TEST_SERVERS=host:port." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: ZooKeeper or Java is missing; run as root, or install them yourself:" >&2
    echo "setup:   apt-get install -y zookeeper default-jre-headless" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "setup: installing ZooKeeper and a Java runtime from Debian packages..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper default-jre-headless >/dev/null
echo "setup: done" >&2

#!/bin/sh
# zk-debian.sh: fetch a newer ZooKeeper server than Debian 12's 3.8.0 from
# Debian 13 (trixie: libzookeeper-java 3.9.3) without installing it or
# touching the system's apt configuration (its own sources list, lists and
# cache under the cache directory), and lay it out as an unpacked release
# that testkit/zktest's local provider runs when ZOOKEEPER_HOME points there. Print
# that directory.
#
#	ZOOKEEPER_HOME=$(scripts/zk-debian.sh) go test ./testkit/zktest/...
#	make nemesis ZK=debian13
#
# lib/ holds trixie's zookeeper and zookeeper-jute jars; the jar's manifest
# names its other dependencies (slf4j, netty, commons-*, ...) in
# /usr/share/java, which Debian 12's zookeeper package (scripts/setup.sh)
# already installed; slf4j-simple and netty-codec are linked in as testkit/zktest's
# Debian classpath does. The cache is $ZK_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes); a fetched version is kept.
#
# Maven Central would be the usual source (org.apache.zookeeper:zookeeper),
# but this project's machines reach only Debian's, Go's and npm's
# registries.
set -eu
cache=${ZK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes}
home=$cache/zookeeper-debian13
if ls "$home"/lib/zookeeper-3.*.jar >/dev/null 2>&1; then
	echo "$home"
	exit 0
fi
for f in /usr/share/java/slf4j-simple.jar /usr/share/java/slf4j-api.jar /usr/share/java/netty-handler.jar; do
	[ -e "$f" ] || { echo "zk-debian.sh: $f missing: run scripts/setup.sh (Debian's zookeeper) first" >&2; exit 1; }
done
keyring=/usr/share/keyrings/debian-archive-trixie-stable.gpg
[ -e "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt=$cache/apt-trixie
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
echo "deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" >"$apt/sources.list"
set -- -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=- \
	-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status=/var/lib/dpkg/status
apt-get -qq "$@" update >&2
tmp=$(mktemp -d)
chmod 755 "$tmp" # apt-get download runs as _apt when it can
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get -qq "$@" download libzookeeper-java) >&2
dpkg -x "$tmp"/libzookeeper-java_*.deb "$tmp/x"
mkdir -p "$tmp/home/lib"
for j in "$tmp"/x/usr/share/java/zookeeper-3.*.jar "$tmp"/x/usr/share/java/zookeeper-jute-3.*.jar; do
	[ -f "$j" ] && [ ! -L "$j" ] && cp "$j" "$tmp/home/lib/"
done
ls "$tmp"/home/lib/zookeeper-3.*.jar >/dev/null
ln -s /usr/share/java/slf4j-simple.jar "$tmp/home/lib/slf4j-simple.jar"
codec=$(ls /usr/share/java/netty-codec-4*.jar 2>/dev/null | head -n1 || true)
[ -n "$codec" ] && ln -s "$codec" "$tmp/home/lib/$(basename "$codec")"
rm -rf "$home"
mv "$tmp/home" "$home"
echo "$home"

#!/bin/sh
# kube-apiserver.sh: build a real Kubernetes API server from the Go module
# proxy, once per machine, and print the binary's path. The k8stest harness
# (backend/k8slease/k8stest) runs it over Debian's etcd-server.
#
#	KUBE_APISERVER=$(scripts/kube-apiserver.sh) go test ./backend/k8slease/...
#
# The first run costs about 12 CPU-minutes (4 to 6 minutes on 2 idle cores;
# 37 minutes were measured on a 2-core machine running eight people's
# tests) and a 98 MB binary in the cache, plus the module downloads and Go's
# build cache; later runs print the cached path at once. Needs only go (and sh, sed, cp from coreutils): no git,
# no container, no Kubernetes release download.
#
# How: k8s.io/kubernetes is a module on the proxy, but its go.mod replaces
# every k8s.io/* library with ./staging/src/k8s.io/..., directories a module
# zip leaves out. The script copies the module's source to a temporary
# directory, turns each staging replace into a require of the matching
# published k8s.io/* module (v0.34.4 for v1.34.4), builds ./cmd/kube-apiserver
# there and renames the binary into the cache (atomic: a concurrent reader
# sees the whole binary or none). Nothing of the source stays behind.
#
# The cache is $ZK_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes);
# the version is $KUBE_VERSION (default v1.34.4).
set -eu
version=${KUBE_VERSION:-v1.34.4}
cache=${ZK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes}
dir=$cache/kube-apiserver-$version
bin=$dir/kube-apiserver
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
command -v go >/dev/null || { echo "kube-apiserver.sh: go is not on PATH" >&2; exit 1; }
# v1.X.Y's libraries are published as v0.X.Y.
libs=v0.${version#v1.}
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/build.XXXXXX") # same file system as the cache: the final mv is a rename
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM # run the EXIT trap (sh runs it on exit only)
start=$(date +%s)
echo "kube-apiserver.sh: building kube-apiserver $version once for this machine (about 12 CPU-minutes: 4 to 6 minutes on 2 idle cores; cached in $dir)" >&2
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
src=$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[ -n "$src" ] && [ -f "$src/go.mod" ] || { echo "kube-apiserver.sh: go mod download k8s.io/kubernetes@$version gave no source directory" >&2; exit 1; }
cp -R "$src" "$tmp/src"
chmod -R u+w "$tmp/src"
# The vendor tree is not needed (-mod=mod) and would make go prefer it.
rm -rf "$tmp/src/vendor"
cd "$tmp/src"
edits=""
for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/.*#\1#p' go.mod); do
	edits="$edits -dropreplace=$m"
	# Only modules the build requires get a version; the others (samples,
	# tools) would be downloads for nothing.
	if grep -Eq "^[[:space:]]+$m v0\.0\.0" go.mod; then
		edits="$edits -require=$m@$libs"
	fi
done
[ -n "$edits" ] || { echo "kube-apiserver.sh: no staging replace directives found in go.mod: layout changed?" >&2; exit 1; }
# shellcheck disable=SC2086 # word splitting of the edit list is intended
go mod edit $edits
rm -f go.work go.work.sum
echo "kube-apiserver.sh: downloading modules and compiling (progress: none for a few minutes is normal)" >&2
vpkg=k8s.io/component-base/version
minor=${libs#v0.}
minor=${minor%%.*}
go build -trimpath -o "$tmp/kube-apiserver" \
	-ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" \
	./cmd/kube-apiserver
"$tmp/kube-apiserver" --version >&2
mv -f "$tmp/kube-apiserver" "$bin"
end=$(date +%s)
echo "kube-apiserver.sh: built in $((end - start)) s, $(du -m "$bin" | cut -f1) MB: $bin" >&2
echo "$bin"

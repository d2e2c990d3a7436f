#!/usr/bin/env bash
# api.sh: the exported API of every library package of every module of the
# workspace, against the committed baseline of the last tag (api/v0.1.0/:
# one file of export data per package, written by apidiff).
#
#	scripts/api.sh          (make api) report the incompatible changes; fail on any
#	scripts/api.sh write    (make api-baseline) rewrite the baseline from the tree
#
# Library packages: every package of every module in go.work except those
# under cmd/, internal/, testkit/ or scripts/ and the test kits and fault
# harnesses that sit beside a backend (a path element ending in test, nem or
# nemesis): none of those is a promise. A package missing from the baseline
# is new (reported, compatible); a baseline package gone from the tree is an
# incompatible change.
#
# apidiff (golang.org/x/exp/cmd/apidiff, the version pinned below) is
# installed from the Go module proxy once into the cache directory
# (${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes). The baseline is written with
# -trimpath, so that it holds no path of the machine that wrote it.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

APIDIFF_VERSION=v0.0.0-20261113113407-e3970619a1a4
BASELINE=api/v0.1.0
ROOT=github.com/zkrecipes/zkrecipes

mode=${1:-check}
case $mode in
check | write) ;;
*)
	echo "usage: $0 [check|write]" >&2
	exit 2
	;;
esac

cache=${XDG_CACHE_HOME:-$HOME/.cache}/zkrecipes/apidiff-$APIDIFF_VERSION
apidiff=$cache/apidiff
if [ ! -x "$apidiff" ]; then
	mkdir -p "$cache"
	(cd "$cache" && GOWORK=off GOBIN="$cache" go install "golang.org/x/exp/cmd/apidiff@$APIDIFF_VERSION")
fi

# libs prints "import-path module-dir" for each library package.
libs() {
	local dir
	for dir in $(go list -m -f '{{.Dir}}'); do
		go list -f "{{.ImportPath}} $dir" "$dir/..."
	done | awk -v root="$ROOT" '{
		rel = ($1 == root) ? "" : substr($1, length(root) + 2)
		n = split(rel, el, "/")
		for (i = 1; i <= n; i++)
			if (el[i] ~ /^(cmd|internal|testkit|scripts)$/ || el[i] ~ /(test|nem|nemesis)$/)
				next
		print
	}' | sort -u
}

# file names the baseline file of an import path.
file() {
	local rel=${1#"$ROOT"}
	echo "$BASELINE/${rel#/}.export"
}

if [ "$mode" = write ]; then
	rm -rf "$BASELINE"
	n=0
	while read -r pkg dir; do
		out=$top/$(file "$pkg")
		mkdir -p "$(dirname "$out")"
		# apidiff loads the package in the module's own directory.
		(cd "$dir" && GOFLAGS="${GOFLAGS:-} -trimpath" "$apidiff" -w "$out" "$pkg")
		n=$((n + 1))
	done < <(libs)
	echo "api: wrote $n packages to $BASELINE/"
	exit 0
fi

[ -d "$BASELINE" ] || { echo "api: $BASELINE/ missing: scripts/api.sh write" >&2; exit 1; }
bad=0
n=0
seen=$(mktemp)
trap 'rm -f "$seen"' EXIT
while read -r pkg dir; do
	f=$(file "$pkg")
	echo "$f" >>"$seen"
	n=$((n + 1))
	if [ ! -e "$f" ]; then
		echo "api: $pkg: new package (not in $BASELINE/)"
		continue
	fi
	report=$(cd "$dir" && "$apidiff" -incompatible "$top/$f" "$pkg")
	if [ -n "$report" ]; then
		echo "api: $pkg: incompatible with $BASELINE:"
		echo "$report" | sed 's/^/	/'
		bad=$((bad + 1))
	fi
done < <(libs)
while read -r f; do
	if ! grep -qxF "$f" "$seen"; then
		echo "api: ${f%.export}: package removed (it is in the baseline)"
		bad=$((bad + 1))
	fi
done < <(find "$BASELINE" -name '*.export' | sort)
if [ "$bad" -gt 0 ]; then
	echo "api: FAIL: $bad of $n packages changed incompatibly against $BASELINE/" >&2
	exit 1
fi
echo "api: ok: $n packages compatible with $BASELINE/"

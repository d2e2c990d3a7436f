#!/usr/bin/env bash
# The repository's Go modules, found by their go.mod files (never a fixed
# list), and the edits a release makes to them (docs/releasing.md).
#
#   scripts/modules.sh list            one line per module: its directory and path
#   scripts/modules.sh version         the version at which the modules require each other
#   scripts/modules.sh set-version V   require each other at V in every go.mod, and rewrite go.work
#   scripts/modules.sh work            rewrite go.work for the modules found (after adding one)
#   scripts/modules.sh check           fail unless the versions agree and go.work is as `work` writes it
#   scripts/modules.sh tidy            go mod tidy in every module, each against the others' directories
#   scripts/modules.sh tags V          the release's tags, in the order to push them (step, tag, dir)
#   scripts/modules.sh proxy DIR [V]   publish the working tree's modules into DIR for GOPROXY=file://DIR, at V
#                                      (default: V-releasetest.h<hash>); prints the version (docs/releasing.md)
#
# Every module requires our other modules at one version V (the release
# being prepared, or the last one); go.work uses every module's directory
# and maps V of each to it, so that development never reads a published
# copy. A go.mod never holds a replace directive: `go install ...@V` refuses one.
set -euo pipefail
here="$PWD"
cd "$(dirname "$0")/.."

# modules prints "dir path" for every go.mod below the root, skipping what
# the go command skips (testdata, vendor, names starting with . or _).
modules() {
	find . \( -name testdata -o -name vendor -o -name '[._]?*' \) -prune -o -name go.mod -print |
		sed 's|^\./||; s|/\?go\.mod$||' | LC_ALL=C sort |
		while read -r dir; do
			dir="${dir:-.}"
			printf '%s %s\n' "$dir" "$(awk '$1 == "module" { print $2; exit }' "$dir/go.mod")"
		done
}

# requires prints "path version" for each requirement of go.mod $1 on one of our modules.
requires() {
	local paths
	paths="$(modules | awk '{ print $2 }')"
	awk -v paths="$paths" '
		BEGIN { n = split(paths, p, "\n"); for (i = 1; i <= n; i++) ours[p[i]] = 1 }
		/^require[ \t]*\(/ { inblock = 1; next }
		inblock && /^\)/ { inblock = 0; next }
		inblock && ($1 in ours) { print $1, $2 }
		!inblock && $1 == "require" && ($2 in ours) { print $2, $3 }
	' "$1"
}

version() {
	local versions
	versions="$(modules | while read -r dir _; do requires "$dir/go.mod"; done | awk '{ print $2 }' | LC_ALL=C sort -u)"
	if [ -z "$versions" ] || [ "$(printf '%s\n' "$versions" | wc -l)" -ne 1 ]; then
		echo "modules.sh: the modules must require each other at one version; found: ${versions:-none}" >&2
		echo "  (scripts/modules.sh set-version vX.Y.Z sets it everywhere)" >&2
		return 1
	fi
	printf '%s\n' "$versions"
}

# gowork prints go.work for the modules found, with version $1 of each mapped to its directory.
gowork() {
	local v="$1" dir path
	cat <<-'EOF'
	// Written by scripts/modules.sh (set-version, work): edit that, not this.
	//
	// For development only. The modules require each other at a released
	// version (docs/releasing.md); here each module's directory is used
	// instead, and the replace lines map that version of each to its directory
	// (a workspace module only roots the module graph: the go command still
	// reads the go.mod of every version a module requires).
	EOF
	printf '\ngo %s\n\nuse (\n' "$(awk '$1 == "go" { print $2; exit }' go.mod)"
	modules | while read -r dir _; do
		if [ "$dir" = . ]; then printf '\t.\n'; else printf '\t./%s\n' "$dir"; fi
	done
	printf ')\n\nreplace (\n'
	modules | while read -r dir path; do
		if [ "$dir" = . ]; then dir=''; fi
		printf '\t%s %s => ./%s\n' "$path" "$v" "$dir"
	done
	printf ')\n'
}

set_version() {
	local v="$1" dir path req _
	case "$v" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "modules.sh: $v is not a semantic version vX.Y.Z" >&2; return 1 ;; esac
	while read -r dir _; do
		requires "$dir/go.mod" | while read -r req _; do
			(cd "$dir" && go mod edit -require="$req@$v")
		done
	done < <(modules)
	gowork "$v" > go.work
}

check() {
	local v
	v="$(version)"
	if ! diff -u go.work <(gowork "$v") >&2; then
		echo "modules.sh: go.work is not as scripts/modules.sh work writes it (the diff above)" >&2
		return 1
	fi
	if grep -l '^replace\|^[ \t]*replace[ \t(]' $(modules | awk '{ print $1 "/go.mod" }') >&2; then
		echo "modules.sh: the go.mod files above hold replace directives (go install ...@version refuses them)" >&2
		return 1
	fi
}

# tidy runs go mod tidy in each module outside the workspace, with the
# other modules replaced by their directories for the time of the run:
# plain `go mod tidy` ignores go.work and would fetch the required version.
tidy() {
	local dir path other opath rel
	local -a edits drops
	while read -r dir path; do
		edits=() drops=()
		while read -r other opath; do
			[ "$opath" != "$path" ] || continue
			rel="$(realpath --relative-to="$dir" "$other")"
			case "$rel" in ..*) ;; *) rel="./$rel" ;; esac
			edits+=("-replace=$opath=$rel")
			drops+=("-dropreplace=$opath")
		done < <(modules)
		echo "go mod tidy in $dir" >&2
		(
			cd "$dir"
			go mod edit "${edits[@]}"
			trap 'go mod edit "${drops[@]}"' EXIT
			GOWORK=off go mod tidy
		)
	done < <(modules)
}

# tags prints "step tag dir" for every module at version $1: a module's step
# is 1 + the highest step of the modules it requires (the root module: 1),
# so that each tag is pushed after the tags of what its module requires.
tags() {
	local v="$1" dir path req _ changed=1 s
	local -A step=() reqs=() dirof=()
	while read -r dir path; do
		dirof[$path]="$dir"
		reqs[$path]="$(requires "$dir/go.mod" | awk '{ print $1 }' | tr '\n' ' ')"
		step[$path]=1
	done < <(modules)
	while [ "$changed" = 1 ]; do
		changed=0
		for path in "${!reqs[@]}"; do
			for req in ${reqs[$path]}; do
				s=$((step[$req] + 1))
				if [ "$s" -gt "${step[$path]}" ]; then step[$path]=$s changed=1; fi
				[ "$s" -le "${#reqs[@]}" ] || { echo "modules.sh: the modules require each other in a cycle" >&2; return 1; }
			done
		done
	done
	for path in "${!step[@]}"; do
		dir="${dirof[$path]}"
		if [ "$dir" = . ]; then printf '%s %s .\n' "${step[$path]}" "$v"; else printf '%s %s/%s %s\n' "${step[$path]}" "$dir" "$v" "$dir"; fi
	done | LC_ALL=C sort
}

case "${1:-}" in
list) modules ;;
version) version ;;
set-version) [ $# -eq 2 ] || { echo "usage: $0 set-version vX.Y.Z" >&2; exit 2; }; set_version "$2" ;;
work) gowork "$(version)" > go.work ;;
check) check ;;
tidy) tidy ;;
tags) [ $# -eq 2 ] || { echo "usage: $0 tags vX.Y.Z" >&2; exit 2; }; tags "$2" ;;
proxy)
	[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 proxy DIR [vX.Y.Z...]" >&2; exit 2; }
	case "$2" in /*) dir="$2" ;; *) dir="$here/$2" ;; esac
	go run ./testkit/releasetest/publish "$dir" ${3:+"$3"}
	;;
*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

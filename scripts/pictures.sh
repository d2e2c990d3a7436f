#!/usr/bin/env bash
# Draws the pictures docs/ embeds, and proves in a real browser that the
# nemesis pages work: a seeded run of the mutex and a run of the deliberately
# broken recipe, each written as a page by `cmd/nemesis -out`, are opened in
# headless Chromium (Debian's chromium, installed here if missing). A page
# whose script fails, or does not finish laying it out, fails this script
# (the page sets data-ready="ok" on <html> when laid out, data-error on any
# script error); so does a porcupine view that draws nothing. Then it takes
# the screenshots, each as tall as its page (data-height):
#   nemesis-run.png        the seeded run, whole
#   nemesis-stale.png      the same page at the first write refused as stale
#   nemesis-violation.png  the broken recipe's page, as it opens: at the violation
# and writes their captions from the same runs (cmd/nemesis/captions):
# captions.md. Timing varies from run to run even with a seed, so the
# pictures and the figures said of them must come from one run: by default
# all of it goes to the pages' directory (printed at the end) and docs/ is
# left alone; with UPDATE_DOCS=1 the pictures go to docs/img and the
# captions replace the generated block of docs/reliability.md.
#
# PICTURES_RUN (fault phase of the seeded run, default 90s) and
# PICTURES_SEED (default 1) vary it. PICTURES_BACKEND=etcd|pg|redis draws one
# seeded mutex run of that backend instead (nemesis-<backend>.png: no broken
# recipe, no stale close-up, no captions; its summary line is in run.log). PICTURES_FROM=<a pages directory> runs
# nothing: it draws the pages again from the histories there (after a change
# of the page) and takes the pictures of those.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${PICTURES_RUN:-90s}
seed=${PICTURES_SEED:-1}
backend=${PICTURES_BACKEND:-zk}
case "$backend" in
  zk | etcd | pg | redis) ;;
  *) echo "pictures: PICTURES_BACKEND=$backend: zk, etcd, pg or redis" >&2; exit 2 ;;
esac
broken_run=3s
if ! command -v chromium >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "pictures: chromium is missing and this is not a Debian/Ubuntu machine; install Chromium" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "pictures: installing chromium from Debian packages..." >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

pages=$(mktemp -d "${TMPDIR:-/tmp}/nemesis-pages.XXXXXX")
profile=$(mktemp -d "${TMPDIR:-/tmp}/chromium-profile.XXXXXX")
trap 'rm -rf "$profile"' EXIT
browse() { # browse ARGS... URL: headless Chromium, nothing fetched, its chatter dropped
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --hide-scrollbars "$@" 2>/dev/null
}

if [ -n "${PICTURES_FROM:-}" ]; then
  echo "pictures: drawing the runs in ${PICTURES_FROM} again, pages in ${pages}" >&2
  if [ ! -f "$PICTURES_FROM/pictures.env" ]; then
    echo "pictures: $PICTURES_FROM/pictures.env is missing: not a pages directory of this script" >&2
    exit 1
  fi
  cp "$PICTURES_FROM/pictures.env" "$pages/"
  for kind in run broken; do
    [ -d "$PICTURES_FROM/$kind" ] || continue # a backend's pages have no broken run
    h=$(ls "$PICTURES_FROM/$kind"/*/history.json)
    out="$pages/$kind/$(basename "$(dirname "$h")")"
    go run ./cmd/nemesis -render "$h" -out "$out" >/dev/null
    cp "$h" "$out/"
  done
else
  # The seeded run must pass; the broken recipe must be caught (exit 1).
  echo "pictures: a ${run} seeded ${backend} run (seed ${seed}), pages in ${pages}" >&2
  go run ./cmd/nemesis -backend "$backend" -duration 1s -run "$run" -seed "$seed" -recipes mutex -out "$pages/run" -history-dir "$pages" | tee "$pages/run.log"
  if [ "$backend" != zk ]; then
    printf 'run=%q\nbackend=%q\n' "$run" "$backend" >"$pages/pictures.env"
  fi
fi
if [ -z "${PICTURES_FROM:-}" ] && [ "$backend" = zk ]; then
  set +e
  go run ./cmd/nemesis -duration 1s -run "$broken_run" -seed "$seed" -recipes broken-mutex -out "$pages/broken" -history-dir "$pages" >"$pages/broken.log" 2>&1
  code=$?
  set -e
  if [ "$code" != 1 ] || ! grep -q "lease contexts live at once" "$pages/broken.log"; then
    echo "pictures: the broken recipe was not caught (exit $code); see $pages/broken.log" >&2
    exit 1
  fi
  zookeeper=$(sed -n 's/.*(ZooKeeper \([^,)]*\).*/\1/p' "$pages/run.log" | head -1)
  printf 'run=%q\nbroken_run=%q\nzookeeper=%q\n' "$run" "$broken_run" "$zookeeper" >"$pages/pictures.env"
fi
# shellcheck source=/dev/null
. "$pages/pictures.env"

backend=${backend:-zk} # a pages directory of an older script has none
run_dir=$(dirname "$(ls "$pages"/run/*/index.html)")
checked=("$run_dir/index.html")
if [ "$backend" = zk ]; then
  broken_dir=$(dirname "$(ls "$pages"/broken/*/index.html)")
  checked+=("$broken_dir/index.html")
fi
declare -A height
for page in "${checked[@]}"; do
  dom=$(browse --window-size=1400,800 --virtual-time-budget=5000 --dump-dom "file://$page")
  if grep -q 'data-error=' <<<"$dom" || ! grep -q 'data-ready="ok"' <<<"$dom"; then
    echo "pictures: $page: the script failed: $(grep -o 'data-error="[^"]*"' <<<"$dom" || echo 'it never finished')" >&2
    exit 1
  fi
  height[$page]=$(grep -o 'data-height="[0-9]*"' <<<"$dom" | head -1 | tr -dc 0-9)
  for view in "$(dirname "$page")"/porcupine-*.html; do
    if ! browse --virtual-time-budget=5000 --dump-dom "file://$view" | grep -q '<div id="canvas"><svg'; then
      echo "pictures: $view: porcupine's view drew nothing" >&2
      exit 1
    fi
  done
  echo "pictures: $page: laid out without a script error" >&2
done

dir=$pages
[ "${UPDATE_DOCS:-}" = 1 ] && dir=docs/img
mkdir -p "$dir"
shot() { # shot FILE PAGE [#FRAGMENT]: the page's whole height, 1400 px wide
  browse --window-size=1400,"${height[$2]:-800}" --virtual-time-budget=5000 --screenshot="$1" "file://$2${3:-}" >/dev/null
  kb=$(du -k "$1" | cut -f1)
  echo "pictures: $1 ($kb KB)" >&2
  if [ "$kb" -ge 300 ]; then
    echo "pictures: $1 is $kb KB, more than the 300 KB a picture in docs/ may take" >&2
    exit 1
  fi
}
if [ "$backend" != zk ]; then
  shot "$dir/nemesis-$backend.png" "$run_dir/index.html"
  echo "pictures: the $backend run's page is in $pages (its summary: $pages/run.log)" >&2
  exit 0
fi
shot "$dir/nemesis-run.png" "$run_dir/index.html"
# the first stale write the page links, the znode register's if it has one
link=$(grep -o 'id="stale-znode" href="#t=[0-9.-]*"' "$run_dir/index.html" ||
  grep -o 'id="stale-[a-z]*" href="#t=[0-9.-]*"' "$run_dir/index.html" | head -1 || true)
stale=()
if [ -n "$link" ]; then
  fragment=$(sed 's/.*href="//; s/"$//' <<<"$link")
  register=$(sed 's/id="stale-\([a-z]*\)".*/\1/' <<<"$link")
  shot "$dir/nemesis-stale.png" "$run_dir/index.html" "$fragment"
  stale=(-stale "$fragment" -stale-register "$register")
else
  echo "pictures: no write was refused as stale in this run: no nemesis-stale.png (try another PICTURES_SEED)" >&2
fi
shot "$dir/nemesis-violation.png" "$broken_dir/index.html"

captions=(go run ./cmd/nemesis/captions -run "$run_dir" -broken "$broken_dir" -fault-phase "$run" -broken-phase "$broken_run" -zookeeper "$zookeeper" "${stale[@]}")
"${captions[@]}" >"$pages/captions.md"
if [ "${UPDATE_DOCS:-}" = 1 ]; then
  "${captions[@]}" -update docs/reliability.md
  echo "pictures: docs/img and the captions in docs/reliability.md updated" >&2
else
  echo "pictures: the pictures and their captions (captions.md) are in $pages; UPDATE_DOCS=1 puts them in docs/" >&2
fi
echo "pictures: the pages are in $pages" >&2

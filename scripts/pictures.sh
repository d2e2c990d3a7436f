#!/usr/bin/env bash
# Draws the pictures docs/ embeds, and proves in a real browser that the
# nemesis pages work: a seeded run of the mutex and a run of the deliberately
# broken recipe, each written as a page by `cmd/nemesis -out`, are opened in
# headless Chromium (Debian's chromium, installed here if missing). A page
# whose script fails, or does not finish laying it out, fails this script
# (the page sets data-ready="ok" on <html> when laid out, data-error on any
# script error); so does a porcupine view that draws nothing. Then it takes
# the screenshots into $PICTURES_DIR:
#   nemesis-run.png        the seeded run, whole
#   nemesis-stale.png      the same page at the first write refused as stale
#   nemesis-violation.png  the broken recipe's page, as it opens: at the violation
#
# PICTURES_RUN (fault phase of the seeded run, default 90s), PICTURES_SEED
# (default 1) and PICTURES_DIR (default docs/img) vary it; the pages stay in
# the directory printed at the end. PICTURES_FROM=<that directory> runs
# nothing: it draws the pages again from the histories there (after a change
# of the page) and takes the pictures of those.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${PICTURES_RUN:-90s}
seed=${PICTURES_SEED:-1}
dir=${PICTURES_DIR:-docs/img}

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
  for kind in run broken; do
    h=$(ls "$PICTURES_FROM/$kind"/*/history.json)
    go run ./cmd/nemesis -render "$h" -out "$pages/$kind/$(basename "$(dirname "$h")")" >/dev/null
  done
else
  # The seeded run must pass; the broken recipe must be caught (exit 1).
  echo "pictures: a ${run} seeded run (seed ${seed}) and the broken recipe, pages in ${pages}" >&2
  go run ./cmd/nemesis -duration 1s -run "$run" -seed "$seed" -recipes mutex -out "$pages/run" -history-dir "$pages"
  set +e
  go run ./cmd/nemesis -duration 1s -run 3s -seed "$seed" -recipes broken-mutex -out "$pages/broken" -history-dir "$pages" >"$pages/broken.log" 2>&1
  code=$?
  set -e
  if [ "$code" != 1 ] || ! grep -q "lease contexts live at once" "$pages/broken.log"; then
    echo "pictures: the broken recipe was not caught (exit $code); see $pages/broken.log" >&2
    exit 1
  fi
fi

run_page=$(ls "$pages"/run/*/index.html)
broken_page=$(ls "$pages"/broken/*/index.html)
for page in "$run_page" "$broken_page"; do
  dom=$(browse --virtual-time-budget=5000 --dump-dom "file://$page")
  if grep -q 'data-error=' <<<"$dom" || ! grep -q 'data-ready="ok"' <<<"$dom"; then
    echo "pictures: $page: the script failed: $(grep -o 'data-error="[^"]*"' <<<"$dom" || echo 'it never finished')" >&2
    exit 1
  fi
  for view in "$(dirname "$page")"/porcupine-*.html; do
    if ! browse --virtual-time-budget=5000 --dump-dom "file://$view" | grep -q '<div id="canvas"><svg'; then
      echo "pictures: $view: porcupine's view drew nothing" >&2
      exit 1
    fi
  done
  echo "pictures: $page: laid out without a script error" >&2
done

mkdir -p "$dir"
shot() { # shot FILE URL
  browse --window-size=1400,800 --virtual-time-budget=5000 --screenshot="$1" "$2" >/dev/null
  echo "pictures: $1 ($(du -k "$1" | cut -f1) KB)" >&2
}
shot "$dir/nemesis-run.png" "file://$run_page"
stale=$(grep -o 'id="stale-znode" href="#t=[0-9.-]*"' "$run_page" | sed 's/.*href="//; s/"$//' || true)
if [ -n "$stale" ]; then
  shot "$dir/nemesis-stale.png" "file://$run_page$stale"
else
  echo "pictures: no write was refused as stale in this run: no nemesis-stale.png (try another PICTURES_SEED)" >&2
fi
shot "$dir/nemesis-violation.png" "file://$broken_page"
echo "pictures: the pages are in $pages" >&2

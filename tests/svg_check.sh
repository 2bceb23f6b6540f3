#!/bin/sh
# The lab pictures open in a browser: headless Chromium loads each SVG the demo lab writes, must
# build it without an XML parser error, and must paint it (its screenshot differs from a blank
# page's). A broken SVG is checked the same way first, so the check is known to catch errors.
# Usage: tests/svg_check.sh GPULAB_BINARY OUTDIR    (exit 77 = skipped: no Chromium here)
set -u
gl=$1
out=$2

. "$(dirname "$0")/chromium.sh"

# The DOM Chromium built for an SVG file has no parser error and an <svg> root.
parses() {
  dom=$(chrome --dump-dom "file://$1") || return 1
  case "$dom" in *parsererror*|*"This page contains the following errors"*) return 1 ;; esac
  case "$dom" in *"<svg"*) return 0 ;; esac
  return 1
}

size() { wc -c <"$1" | tr -d ' '; }

rm -rf "$out"
mkdir -p "$out/pics"

# the control: a document Chromium must refuse
printf '<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>\n' >"$out/broken.svg"
parses "$out/broken.svg" && fail "Chromium accepted a broken SVG: the check cannot see errors"

printf '<svg xmlns="http://www.w3.org/2000/svg" width="900" height="600"><rect width="900" height="600" fill="white"/></svg>\n' \
  >"$out/blank.svg"
parses "$out/blank.svg" || fail "Chromium could not load a blank SVG (see $out/chromium.log)"
chrome --window-size=1000,800 --screenshot="$out/blank.png" "file://$out/blank.svg" >/dev/null
[ -s "$out/blank.png" ] || fail "no screenshot of the blank SVG (see $out/chromium.log)"
blank=$(size "$out/blank.png")

GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gl" tests/lab_fixtures/demo_lab.lua --svg "$out/pics/" >"$out/lab.log" 2>&1 ||
  fail "the demo lab failed: $(cat "$out/lab.log")"

n=0
for f in "$out"/pics/*.svg; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .svg)
  parses "$f" || fail "$name.svg: Chromium reports an XML error or no <svg> root"
  chrome --window-size=1000,800 --screenshot="$out/$name.png" "file://$f" >/dev/null
  [ -s "$out/$name.png" ] || fail "$name.svg: no screenshot"
  # a painted chart (lines, text, colors) compresses far worse than a white page
  s=$(size "$out/$name.png")
  [ "$s" -gt $((blank * 2)) ] || fail "$name.svg: the screenshot looks blank ($s bytes, blank page $blank)"
  echo "ok $name.svg ($s bytes of PNG, blank page $blank)"
  n=$((n + 1))
done
[ "$n" -eq 3 ] || fail "expected 3 pictures from the demo lab, found $n"
echo "all $n pictures open in $browser"

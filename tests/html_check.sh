#!/bin/sh
# The --html report in a browser: headless Chromium loads the page the report fixture lab writes
# (without a GPU), and the DOM it builds must hold every claim with its verdict badge and source,
# the three pictures and the three ratio plots as SVG elements; its screenshot must be painted.
# A page missing a claim is checked the same way first, so the check is known to catch that.
# Usage: tests/html_check.sh GPULAB_BINARY OUTDIR    (exit 77 = skipped: no Chromium here)
set -u
gl=$1
out=$2

. "$(dirname "$0")/chromium.sh"

rm -rf "$out"
mkdir -p "$out"

GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gl" tests/lab_fixtures/report_lab.lua --html "$out/report.html" \
  --json "$out/report.json" >"$out/lab.log" 2>&1 || fail "the report lab failed: $(cat "$out/lab.log")"

# What the DOM must hold, one grep pattern a line, from the JSON the same run wrote
REPORT_JSON="$out/report.json" GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gl" -e '
local json = require("gpulab.json")
local f = assert(io.open(os.getenv("REPORT_JSON"))); local res = json.decode(f:read("a")); f:close()
for _, v in ipairs(res.verdicts) do
  print("id=\"claim-" .. v.id .. "\"")
  print("<span class=\"badge\">" .. v.verdict .. "</span>")
  print("source: " .. v.source)
end' >"$out/expected.txt" 2>&1 || fail "reading the JSON: $(cat "$out/expected.txt")"
[ "$(wc -l <"$out/expected.txt")" -eq 12 ] || fail "expected 4 claims in the JSON: $(cat "$out/expected.txt")"

# check_dom FILE: every expected line is in Chromium's DOM, with 6 <svg> elements
check_dom() {
  dom=$(chrome --dump-dom "file://$1") || return 1
  printf '%s\n' "$dom" >"$out/dom.html"
  while IFS= read -r line; do
    grep -qF -- "$line" "$out/dom.html" || { echo "missing from the DOM: $line"; return 1; }
  done <"$out/expected.txt"
  n=$(grep -o '<svg ' "$out/dom.html" | wc -l)
  [ "$n" -eq 6 ] || { echo "$n <svg> elements, expected 6"; return 1; }
  return 0
}

# the control: the page with one claim taken out must fail the check
sed 's/id="claim-same"/id="claim-gone"/' "$out/report.html" >"$out/control.html"
check_dom "$out/control.html" >/dev/null && fail "a page without the claim 'same' passed: the check cannot see it"

check_dom "$out/report.html" || fail "the report in Chromium (see $out/dom.html, $out/chromium.log)"

printf '<!DOCTYPE html><html><body></body></html>\n' >"$out/blank.html"
chrome --window-size=1100,2400 --screenshot="$out/blank.png" "file://$out/blank.html" >/dev/null
chrome --window-size=1100,2400 --screenshot="$out/report.png" "file://$out/report.html" >/dev/null
[ -s "$out/report.png" ] && [ -s "$out/blank.png" ] || fail "no screenshot (see $out/chromium.log)"
s=$(wc -c <"$out/report.png" | tr -d ' ')
blank=$(wc -c <"$out/blank.png" | tr -d ' ')
[ "$s" -gt $((blank * 4)) ] || fail "the report's screenshot looks blank ($s bytes, blank page $blank)"
echo "ok: the report renders in $browser with 4 claims, their verdicts and sources, 6 pictures ($s bytes of PNG)"

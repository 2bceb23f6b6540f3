#!/bin/sh
# tools/verdicts.sh without a GPU: a fixture lab with one steady and one flipping claim runs 3
# quick + 1 full times; the table has a row per claim, a column per run, and marks the flip.
# Usage: tests/verdicts_check.sh GPULAB_BINARY OUTDIR
set -u
gl=$1
out=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out"
mkdir -p "$out"
# without a device and without ALLOW_NO_GPU it refuses: the verdicts would all be unclear
GPULAB_LIBCUDA=/nonexistent/libcuda.so tools/verdicts.sh "$gl" "$out/refused" >"$out/refused.log" 2>&1
[ $? -eq 2 ] || fail "ran without a GPU: $(cat "$out/refused.log")"
grep -q "sees no GPU" "$out/refused.log" || fail "no reason given: $(cat "$out/refused.log")"

FLIP_STATE=$out/state GPULAB_LIBCUDA=/nonexistent/libcuda.so ALLOW_NO_GPU=1 QUICK_LIMIT=60 FULL_LIMIT=60 \
  LABS="tests/lab_fixtures/flip_lab.lua labs/launch_anatomy.lua" tools/verdicts.sh "$gl" "$out/run" >"$out/table.txt" 2>"$out/progress.log"
rc=$?
cat "$out/table.txt"
[ $rc -eq 1 ] || fail "exit $rc with an unstable claim (want 1)"
grep -Eq '^lab +claim +quick1 +quick2 +quick3 +full +stable$' "$out/table.txt" || fail "header"
grep -Eq '^flip_lab +steady +HOLDS +HOLDS +HOLDS +HOLDS +yes$' "$out/table.txt" || fail "steady row"
grep -Eq '^flip_lab +flips +HOLDS +REFUTED +HOLDS +REFUTED +NO$' "$out/table.txt" || fail "flipping row"
grep -Eq '^launch_anatomy +block0_order +UNCLEAR +UNCLEAR +UNCLEAR +UNCLEAR +yes$' "$out/table.txt" ||
  fail "a never-judged claim is a row too"
grep -q "quick1 exit 0" "$out/table.txt" || fail "run status"
grep -q "claims stable over quick1, quick2, quick3, full" "$out/table.txt" || fail "summary"
[ -s "$out/run/flip_lab-full.json" ] && [ -s "$out/run/launch_anatomy-quick3.json" ] || fail "JSON per run"
grep -q "flip_lab full: exit 0" "$out/progress.log" || fail "progress on stderr"
echo "ok"

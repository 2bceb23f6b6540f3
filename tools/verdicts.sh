#!/bin/sh
# tools/verdicts.sh — are the labs' verdicts reproducible? Runs every lab 3 times with --quick
# and once in full on the same build, each run under a time limit, and prints the verdicts side
# by side: one row per claim, a column per run, and whether all four agree ("stable").
#
#   tools/verdicts.sh [GPULAB_BINARY] [OUTDIR]      (defaults: .device-build/gpulab, verdicts-out)
#   LABS="launch_anatomy tma_double_buffer"  only these labs (default: every labs/*.lua; a path
#                                              ending in .lua is run as it is)
#   QUICK_LIMIT=120 FULL_LIMIT=300             seconds per run before it is stopped
#
# Each run leaves OUTDIR/<lab>-<run>.json and .log; the table is OUTDIR/verdicts.txt too.
#   ALLOW_NO_GPU=1                             run even where gpulab sees no GPU (every claim UNCLEAR)
# Exit status: 0 when every claim is stable and every run finished, 1 otherwise, 2 usage.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
gl=${1:-$here/.device-build/gpulab}
out=${2:-verdicts-out}
quick_limit=${QUICK_LIMIT:-120}
full_limit=${FULL_LIMIT:-300}
[ -x "$gl" ] || { echo "verdicts.sh: $gl is not an executable gpulab (build it or pass its path)" >&2; exit 2; }
mkdir -p "$out" || exit 2
cd "$here" || exit 2

if ! "$gl" -e 'os.exit(cuda.available() and 0 or 3)' >/dev/null 2>&1 && [ "${ALLOW_NO_GPU:-0}" != 1 ]; then
  echo "verdicts.sh: $gl sees no GPU ($("$gl" -e 'print(select(2, cuda.available()))' 2>&1)); ALLOW_NO_GPU=1 runs anyway" >&2
  exit 2
fi

labs=${LABS:-$(for f in labs/*.lua; do basename "$f" .lua; done)}
runs="quick1 quick2 quick3 full"
status="$out/runs.tsv"
: >"$status"
for entry in $labs; do
  case $entry in
    *.lua) script=$entry; lab=$(basename "$entry" .lua) ;;
    *) script=labs/$entry.lua; lab=$entry ;;
  esac
  [ -f "$script" ] || { echo "verdicts.sh: no $script" >&2; exit 2; }
  for run in $runs; do
    case $run in
      quick*) limit=$quick_limit; mode=--quick ;;
      *) limit=$full_limit; mode= ;;
    esac
    rm -f "$out/$lab-$run.json"
    t0=$(date +%s%N)
    # shellcheck disable=SC2086  # $mode is empty or one word
    timeout -k 10 "$limit" "$gl" "$script" $mode --json "$out/$lab-$run.json" >"$out/$lab-$run.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '%s\t%s\t%s\t%s\t%s\n' "$lab" "$run" "$rc" "$ms" "$limit" >>"$status"
    echo "$lab $run: exit $rc in $((ms / 1000)).$(( (ms % 1000) / 100 )) s (limit $limit s)" >&2
  done
done
# shellcheck disable=SC2086  # the run names are words
"$gl" tools/verdicts_table.lua "$out" $runs >"$out/verdicts.txt"
rc=$?
cat "$out/verdicts.txt"
exit $rc

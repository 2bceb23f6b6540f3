#!/usr/bin/env bash
# compute-sanitizer memcheck over every lab in quick mode and every GPU test file, six at a time
# (illegal_access faults on purpose and runs the tools itself). Prints one line per run and a total.
#   tools/device_memcheck.sh OUTDIR   (after tools/device_build.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/device_memcheck.sh OUTDIR}
mkdir -p "$out"
gl=$PWD/.device-build/gpulab
{
  for lab in labs/*.lua; do case $lab in *illegal_access*) ;; *) echo "$lab --quick" ;; esac; done
  for t in tests/lua/gpu_*.lua; do case $t in *child*) ;; *) echo "$t" ;; esac; done
} >"$out/memcheck-jobs.txt"
one() {
  name=$(basename "$1" .lua)
  timeout 300 "$gl" --sanitize=memcheck "$@" >"$out/memcheck-$name.log" 2>&1
  echo "$name rc=$? reports=$(grep -cE '^========= (Invalid|Error|Program hit)' "$out/memcheck-$name.log")"
}
export -f one; export gl out
xargs -P 6 -L 1 bash -c 'one "$@"' _ <"$out/memcheck-jobs.txt" | sort | tee "$out/memcheck.txt"
bad=$(grep -vc ' rc=0 reports=0$' "$out/memcheck.txt")
echo "memcheck: $(wc -l <"$out/memcheck.txt") runs, $bad with a finding or a failure"

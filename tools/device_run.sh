#!/usr/bin/env bash
# The one command for a GPU machine: takes the build carried in .device-build (made on the CPU
# machine with tools/device_build.sh), runs the GPU tests, the benchmarks, every lab in quick
# mode, the labs and GPU tests under compute-sanitizer, and prints one summary table.
# Usage: tools/device_run.sh [OUTDIR]    (OUTDIR defaults to ./device-out)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/device-out}
mkdir -p "$out"
cd "$root"
# The build was configured at /work/main; make that path resolve to this checkout.
if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
export GPULAB_HOME=/work/main GPULAB_CACHE_DIR=$out/cache PATH=/usr/local/cuda/bin:$PATH
gl=/work/main/.device-build/gpulab
summary=$out/summary.md
: >"$summary"
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$summary"; }

{
  echo "## device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || cat "$root/.device-build/COMMIT")"
  date -u +%Y-%m-%dT%H:%MZ
} | tee "$out/device.txt"

printf '| step | result | detail |\n|---|---|---|\n' | tee -a "$summary"

# 1. the GPU tests (label gpu), then the CPU ones as a check that the carried build runs here
( cd /work/main/.device-build && ctest -L gpu --output-on-failure --timeout 300 ) >"$out/ctest-gpu.log" 2>&1
rc=$?
row "ctest -L gpu" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
grep -E 'Test +#' "$out/ctest-gpu.log" | sed 's/^/    /' | tee -a "$out/summary-tests.txt"
( cd /work/main/.device-build && ctest -LE gpu --output-on-failure -j8 --timeout 300 ) >"$out/ctest-cpu.log" 2>&1
rc=$?
row "ctest -LE gpu" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -E 'tests passed|tests failed' "$out/ctest-cpu.log" | tail -1)"

# 2. labs in quick mode
for lab in labs/*.lua; do
  name=$(basename "$lab" .lua)
  start=$(date +%s%N)
  timeout 120 "$gl" "$lab" --quick --json "$out/$name.json" --svg "$out/$name" >"$out/$name.log" 2>&1
  rc=$?
  t=$(( ($(date +%s%N) - start) / 1000000000 ))
  verdicts=$(grep -cE 'HOLDS|REFUTED|UNCLEAR' "$out/$name.log")
  row "lab $name --quick" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$t s, $verdicts verdicts"
done

# 3. benchmarks
for b in tools/bench_launch.lua tools/bench_compile.lua; do
  [ -f "$b" ] || continue
  name=$(basename "$b" .lua)
  timeout 300 "$gl" "$b" >"$out/$name.log" 2>&1
  rc=$?
  row "$name" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "see $name.log"
done

# 4. compute-sanitizer over the GPU tests and the labs (faulty children excluded by the labs)
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck synccheck initcheck; do
    fails=0; runs=0
    for lab in labs/*.lua; do
      name=$(basename "$lab" .lua)
      [ "$name" = illegal_access ] && [ "$tool" != memcheck ] && continue
      runs=$((runs + 1))
      timeout 300 "$gl" --sanitize=$tool "$lab" --quick >"$out/san-$tool-$name.log" 2>&1 || fails=$((fails + 1))
    done
    for t in tests/lua/gpu_*.lua; do
      case "$t" in *child*) continue ;; esac
      runs=$((runs + 1))
      timeout 300 "$gl" --sanitize=$tool "$t" >"$out/san-$tool-$(basename "$t" .lua).log" 2>&1 || fails=$((fails + 1))
    done
    row "compute-sanitizer $tool" "$([ $fails = 0 ] && echo PASS || echo "FAIL $fails/$runs")" "$runs runs"
  done
fi

echo
cat "$summary"
# keep the transfer small: one tarball of logs and pictures
tar -czf "$out/../device-logs.tgz" -C "$out" . 2>/dev/null && mv "$out/../device-logs.tgz" "$out/" 2>/dev/null
exit 0

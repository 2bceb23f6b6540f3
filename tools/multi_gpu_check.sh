#!/usr/bin/env bash
# The several-GPU check, for a machine with two or more H200s (it also runs on one, where the
# parts that need two report what they could not do). Everything goes into OUT:
#   device.txt       GPUs, driver, NVLink topology (nvidia-smi topo -m), NCCL version
#   ctest-multigpu.log   the multi-GPU tests: stand-in ones and the GPU ones (gpu_multigpu)
#   multi_gpu.log/.json/-*.svg   labs/multi_gpu.lua in full (copy matrix, all-reduce 8 B .. 4 GiB)
#   multi_gpu_quick.log/.json    the same with --quick
#   sweep.log/.json  the sweep fixture with --gpus=all (one child per GPU) and sweep_seq.* without
#   nccl_ranks.log   one process per GPU (NCCL multi-process form) through gpu_nccl_rank_child.lua
#   summary.md       one row per step
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is exported here too, and nothing creates
# multicast objects. Usage: tools/multi_gpu_check.sh OUT [GPULAB]   (GPULAB: the binary to use;
# default .device-build/gpulab, made by tools/device_build.sh, else build/gpulab). LAB_ARGS (e.g.
# "--max_bytes=1048576") is appended to the lab's arguments, for trial runs through the stand-ins.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in -h | --help | "") echo "usage: tools/multi_gpu_check.sh OUT [GPULAB]"; [ -n "${1:-}" ]; exit $? ;; esac
out=$(mkdir -p "$1" && cd "$1" && pwd)
gl=${2:-}
if [ -z "$gl" ]; then
  if [ -x "$root/.device-build/gpulab" ]; then gl=$root/.device-build/gpulab; else gl=$root/build/gpulab; fi
fi
build=$(cd "$(dirname "$gl")" && pwd)
gl=$build/$(basename "$gl")
# A build carried from another checkout (tools/device_build.sh at /work/main) names that source
# folder in its tests: make it resolve to this checkout, as tools/device_run.sh does.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src"; fi
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN} GPULAB_CACHE_DIR=$out/cache GPULAB_HOME=$root
cd "$root"
summary=$out/summary.md
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$summary"; }
verdicts() { sed -n '/^## Verdicts/,$p' "$1" | grep -E '^\s*\[(HOLDS|REFUTED|UNCLEAR)\]' | sed 's/^ */    /'; }

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader
  nvidia-smi topo -m
  "$gl" -e 'print("gpulab sees " .. cuda.count() .. " GPU(s); NCCL " .. tostring(cuda.nccl.available() and cuda.nccl.version() or select(2, cuda.nccl.available())))'
  echo "commit $(git rev-parse --short HEAD 2>/dev/null)"
  date -u +%Y-%m-%dT%H:%MZ
} >"$out/device.txt" 2>&1
ngpu=$("$gl" -e 'io.write(cuda.count())' 2>/dev/null || echo 0)
printf '\n%s GPU(s)\n\n| step | result | detail |\n|---|---|---|\n' "$ngpu" | tee -a "$summary"

(cd "$build" && ctest -R 'multigpu|nccl|sweep|run_isolated_many|lab_multi_gpu' --output-on-failure --timeout 600) \
  >"$out/ctest-multigpu.log" 2>&1
rc=$?
row "ctest multi-GPU tests" "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
  "$(grep -E 'tests passed|tests failed' "$out/ctest-multigpu.log" | tail -1)"
grep -E 'Test +#' "$out/ctest-multigpu.log" | sed 's/^ */    /' | tee -a "$summary"

timeout 600 "$gl" tests/lua/gpu_multigpu.lua >"$out/gpu_multigpu.log" 2>&1
rc=$?
row "gpu_multigpu.lua" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$(tail -1 "$out/gpu_multigpu.log")"

for mode in quick full; do
  name=multi_gpu$([ $mode = quick ] && echo _quick)
  args=(); [ $mode = quick ] && args=(--quick)
  start=$(date +%s)
  # shellcheck disable=SC2086 # LAB_ARGS is a list of options
  timeout 1500 "$gl" labs/multi_gpu.lua "${args[@]}" ${LAB_ARGS:-} --json "$out/$name.json" --svg "$out/$name" >"$out/$name.log" 2>&1
  rc=$?
  row "labs/multi_gpu.lua ${args[*]:-(full)}" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" \
    "$(( $(date +%s) - start )) s; $(grep -E '^## Verdicts' "$out/$name.log" | tail -1)"
  verdicts "$out/$name.log" | tee -a "$summary"
done

timeout 300 "$gl" --gpus=all tests/lab_fixtures/sweep_lab.lua --json "$out/sweep.json" >"$out/sweep.log" 2>&1
rc1=$?
timeout 300 "$gl" tests/lab_fixtures/sweep_lab.lua --json "$out/sweep_seq.json" >"$out/sweep_seq.log" 2>&1
rc2=$?
same=$(diff <(grep -E '^\s+[0-9]+ +[0-9]+ +[0-9]+ ' "$out/sweep.log" | awk '{print $1, $2, $3}') \
            <(grep -E '^\s+[0-9]+ +[0-9]+ +[0-9]+ ' "$out/sweep_seq.log" | awk '{print $1, $2, $3}') >/dev/null && echo same || echo DIFFERENT)
row "--gpus=all sweep fixture" "$([ $rc1 = 0 ] && [ $rc2 = 0 ] && echo PASS || echo "FAIL rc=$rc1/$rc2")" \
  "$(grep -E 'configurations over' "$out/sweep.log" | tail -1 | sed 's/^ *//'); table vs one process: $same"

if [ "$ngpu" -ge 2 ]; then
  id=$("$gl" -e 'io.write(cuda.nccl.unique_id())')
  pids=()
  : >"$out/nccl_ranks.log"
  for ((r = 0; r < ngpu; r++)); do
    timeout 180 "$gl" tests/lua/gpu_nccl_rank_child.lua allreduce "$r" "$ngpu" "$id" >>"$out/nccl_ranks.log" 2>&1 &
    pids+=($!)
  done
  fails=0
  for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
  good=$(grep -c "mismatches 0" "$out/nccl_ranks.log")
  row "NCCL one process per GPU (started by the shell, as mpirun would)" \
    "$([ $fails = 0 ] && [ "$good" = "$ngpu" ] && echo PASS || echo FAIL)" "$good of $ngpu ranks right"
else
  row "NCCL one process per GPU" "not run" "needs 2 GPUs; $ngpu present"
fi
echo "summary: $summary"

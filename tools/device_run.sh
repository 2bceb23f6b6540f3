#!/usr/bin/env bash
# The GPU machine's side of the proof. Takes the build carried in .device-build (made on the CPU
# machine by tools/device_build.sh: the GPU machine has no Lua headers) and prints one summary
# table per part. Parts (default: all):
#   tests      ctest -L gpu, then the CPU tests as a check that the carried build runs there
#   labs       every lab in quick mode, with its verdicts
#   bench      launch overhead, compile cache, start-up
#   sanitize   compute-sanitizer memcheck/racecheck/synccheck/initcheck over every lab in quick
#              mode and every GPU test file, several at a time (the deliberately faulting child
#              processes run without the tool, and the labs show that the tool catches them)
#   cache      a lab run with an empty compile cache, then again with it warm
#   leaks      each lab in its own scope: device free memory back to its start once collected
#   stress     10,000 launches interleaved with frees and collections on several streams
#   lifetimes  tools/stress_lifetimes.lua: 100,000 launches, frees, captures, timed-out syncs and
#              collections; threads, device memory and cuda.stats() sampled (also without the watchdog)
#   measure    tools/measure_check.lua: cuda.measure's noise, cold vs hot, throttled samples
#   profile    tools/profile_check.sh: cuda.profile against ncu --clock-control none
#   hostref    tools/bench_host_ref.lua: an 8192x8192 transpose reference, Lua loop vs h:transpose()
#   loader     a lab and a compile with no loader-path entry and an empty compile cache
#   verdicts   tools/verdicts.sh: every lab 3 times quick and once full, verdicts side by side
#   hopper     launches with attributes: the Hopper GPU tests, labs/hopper_clusters.lua three times
#              quick (verdicts side by side), bench_launch --quick (plain and attribute sections)
#   gpu        ctest -L gpu alone (one test at a time), every test's line in the summary
#   memsys     labs/memory_system.lua three times quick, verdicts side by side
#   reports    every lab in quick mode with --json and --html into OUTDIR/reports
#   warp       labs/warp_states.lua three times quick, verdicts side by side
#   pcsncu     tools/pcsample_ncu.lua: cuda.pcsample against ncu's source view on the same kernels
#   l2probe    tools/l2_hit_probe.lua under cuda.profile, and under ncu with --cache-control none / all
#   attrbench  tools/bench_launch.lua --rounds=2 50000 (plain and attribute sections)
#   split      tools/launch_split.lua twice, with the launch-timing build in .device-build-timing
#              (tools/device_build.sh --timing): driver call, C function and Lua loop per launch
#   tma        labs/tma_double_buffer.lua three times quick, verdicts side by side
# Usage: tools/device_run.sh OUTDIR [part...]   (after tools/device_build.sh made .device-build)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all_parts="tests labs bench cache leaks stress sanitize lifetimes measure profile hostref loader verdicts hopper gpu memsys reports warp pcsncu l2probe attrbench tma split"
usage() {
  echo "usage: tools/device_run.sh OUTDIR [part...]"
  echo "  runs the build in .device-build (made by tools/device_build.sh) and writes logs and"
  echo "  OUTDIR/summary.md; parts (default: all, in this order): $all_parts"
}
case ${1:-} in -h | --help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
out=$1
shift
parts=${*:-$all_parts}
for part in $parts; do
  case " $all_parts " in *" $part "*) ;; *) echo "tools/device_run.sh: unknown part '$part'" >&2; usage >&2; exit 2 ;; esac
done
if [ ! -x "$root/.device-build/gpulab" ]; then
  echo "tools/device_run.sh: no $root/.device-build/gpulab: run tools/device_build.sh first" >&2
  exit 2
fi
mkdir -p "$out"
# The build was configured at /work/main; make that path resolve to this checkout.
if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
cd /work/main
export GPULAB_HOME=/work/main GPULAB_CACHE_DIR=$out/cache PATH=/usr/local/cuda/bin:$PATH
gl=/work/main/.device-build/gpulab
summary=$out/summary.md
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$summary"; }
verdict_counts() { # from the lab's closing verdict summary only (each verdict is printed twice)
  local v
  v=$(sed -n '/^## Verdicts/,$p' "$1")
  printf '%s holds, %s refuted, %s unclear' "$(grep -c '^\s*\[HOLDS\]' <<<"$v")" \
    "$(grep -c '^\s*\[REFUTED\]' <<<"$v")" "$(grep -c '^\s*\[UNCLEAR\]' <<<"$v")"
}

# A lab three times in quick mode: a row per run, then whether the verdicts were the same each time,
# then the first run's verdicts. Files: OUT/NAME-RUN.json, .log, NAME-verdicts-RUN.txt.
three_runs() {
  local name=$1 limit=$2 run same
  for run in 1 2 3; do
    timeout "$limit" "$gl" "labs/$name.lua" --quick --json "$out/$name-$run.json" >"$out/$name-$run.log" 2>&1
    row "$name --quick, run $run" "rc=$?" "$(verdict_counts "$out/$name-$run.log")"
    sed -n '/^## Verdicts/,$p' "$out/$name-$run.log" | grep -E '^\s*\[' >"$out/$name-verdicts-$run.txt"
  done
  if cmp -s "$out/$name-verdicts-1.txt" "$out/$name-verdicts-2.txt" &&
     cmp -s "$out/$name-verdicts-1.txt" "$out/$name-verdicts-3.txt"; then same=yes; else same=no; fi
  row "$name verdicts identical over 3 runs" "$same" ""
  sed 's/^ */    /' "$out/$name-verdicts-1.txt" | tee -a "$summary"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "commit $(cat .device-build/COMMIT 2>/dev/null)"
  date -u +%Y-%m-%dT%H:%MZ
} | tee -a "$out/device.txt"
printf '\n| step | result | detail |\n|---|---|---|\n' | tee -a "$summary"

for part in $parts; do
  case $part in
  tests)
    (cd .device-build && ctest -L gpu --output-on-failure --timeout 300) >"$out/ctest-gpu.log" 2>&1
    rc=$?
    row "ctest -L gpu" "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
      "$(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
    grep -E 'Test +#' "$out/ctest-gpu.log" | sed 's/^ */    /' | tee -a "$summary"
    (cd .device-build && ctest -LE gpu -j8 --timeout 300) >"$out/ctest-cpu.log" 2>&1
    rc=$?
    row "ctest -LE gpu (on the GPU machine)" "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
      "$(grep -E 'tests passed|tests failed' "$out/ctest-cpu.log" | tail -1)"
    ;;
  labs)
    for lab in labs/*.lua; do
      name=$(basename "$lab" .lua)
      start=$(date +%s%N)
      timeout 180 "$gl" "$lab" --quick --json "$out/$name.json" --svg "$out/$name" >"$out/$name.log" 2>&1
      rc=$?
      t=$(( ($(date +%s%N) - start) / 1000000 ))
      row "lab $name --quick" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" \
        "$((t / 1000)).$(( (t % 1000) / 100 )) s; $(verdict_counts "$out/$name.log")"
    done
    ;;
  bench)
    # plain launches and, through cuLaunchKernelEx, cluster/pdl/cooperative ones (about 5 minutes on an H200)
    timeout 540 "$gl" tools/bench_launch.lua >"$out/bench_launch.log" 2>&1
    row "bench_launch (N=200000, 3 rounds)" "rc=$?" "$(grep -c ': MET' "$out/bench_launch.log") targets met, $(grep -c ': MISSED' "$out/bench_launch.log") missed$(grep -m1 'columns.*skipped' "$out/bench_launch.log" | sed 's/^/; /')"
    timeout 120 "$gl" tools/bench_compile.lua >"$out/bench_compile.log" 2>&1
    row "bench_compile" "rc=$?" "$(grep -E 'cached compile' "$out/bench_compile.log" | head -1)"
    bash tools/bench_startup.sh "$gl" 200 >"$out/bench_startup.log" 2>&1
    row "bench_startup" "rc=$?" "$(head -1 "$out/bench_startup.log")"
    ;;
  gpu)
    (cd .device-build && ctest -L gpu -E 'lab_memory_system' --output-on-failure --timeout 250) \
      >"$out/ctest-gpu.log" 2>&1
    row "ctest -L gpu (one at a time)" "$([ $? = 0 ] && echo PASS || echo FAIL)" \
      "$(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
    grep -E 'Test +#' "$out/ctest-gpu.log" | sed 's/^ */    /' | tee -a "$summary"
    ;;
  memsys)
    three_runs memory_system 150
    ;;
  tma)
    three_runs tma_double_buffer 200
    ;;
  warp)
    three_runs warp_states 200
    grep -h -A1 'stall_lines)' "$out"/warp_states-?.log | grep measured | sed 's/^ */    /' | tee -a "$summary"
    ;;
  pcsncu)
    rep=$out/pcsncu
    timeout 240 ncu --section SourceCounters --section WarpStateStats --import-source yes \
      -k regex:'two_chains|one_warp_works' -o "$rep" -f "$gl" tools/pcsample_ncu.lua run >"$out/pcsncu-ncu.log" 2>&1
    row "ncu SourceCounters (2 kernels)" "rc=$?" "$(tail -1 "$out/pcsncu-ncu.log" | cut -c1-120)"
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$out/pcsncu-sass.csv" 2>"$out/pcsncu-csv.err"
    row "ncu --page source --csv" "rc=$?" "$(wc -l <"$out/pcsncu-sass.csv") lines; $(head -c 200 "$out/pcsncu-csv.err")"
    timeout 120 "$gl" tools/pcsample_ncu.lua sample "$out/pcsncu-ours.txt" >"$out/pcsncu-sample.log" 2>&1
    row "cuda.pcsample on the same kernels" "rc=$?" "$(wc -l <"$out/pcsncu-ours.txt") PCs"
    timeout 120 "$gl" tools/pcsample_ncu.lua compare "$out/pcsncu-ours.txt" "$out/pcsncu-sass.csv" \
      >"$out/pcsncu-compare.log" 2>&1
    row "compare" "rc=$?" "$(tail -1 "$out/pcsncu-compare.log")"
    sed 's/^/    /' "$out/pcsncu-compare.log" | tee -a "$summary"
    # ncu locks the clocks to base by default; cuda.pcsample runs at the clocks the GPU chooses
    timeout 240 ncu --clock-control none --section SourceCounters --import-source yes \
      -k regex:'two_chains|one_warp_works' -o "$rep-free" -f "$gl" tools/pcsample_ncu.lua run >>"$out/pcsncu-ncu.log" 2>&1
    ncu -i "$rep-free.ncu-rep" --page source --csv --print-source sass >"$out/pcsncu-sass-free.csv" 2>>"$out/pcsncu-csv.err"
    timeout 120 "$gl" tools/pcsample_ncu.lua compare "$out/pcsncu-ours.txt" "$out/pcsncu-sass-free.csv" \
      >"$out/pcsncu-compare-free.log" 2>&1
    row "compare, ncu --clock-control none" "rc=$?" "$(tail -1 "$out/pcsncu-compare-free.log")"
    sed 's/^/    /' "$out/pcsncu-compare-free.log" | tee -a "$summary"
    ;;
  l2probe)
    timeout 120 "$gl" tools/l2_hit_probe.lua >"$out/l2probe-profile.log" 2>&1
    row "l2_hit_probe under cuda.profile" "rc=$?" ""
    sed 's/^/    /' "$out/l2probe-profile.log" | tee -a "$summary"
    for cc in none all; do
      timeout 120 ncu --cache-control $cc -k read16 --metrics \
        dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum \
        "$gl" tools/l2_hit_probe.lua plain >"$out/l2probe-ncu-$cc.log" 2>&1
      row "l2_hit_probe under ncu --cache-control $cc" "rc=$?" ""
      grep -E 'read16|dram__bytes_read.sum|lts__t_sector_hit_rate|srcunit_tex_lookup' "$out/l2probe-ncu-$cc.log" \
        | sed 's/^ */    /' | tee -a "$summary"
    done
    ;;
  attrbench)
    timeout 400 "$gl" tools/bench_launch.lua --rounds=2 50000 >"$out/bench_attr.log" 2>&1
    row "bench_launch --rounds=2 50000" "rc=$?" "$(grep -c ': MET' "$out/bench_attr.log") targets met, $(grep -c ': MISSED' "$out/bench_attr.log") missed"
    grep -E '^(target|host reference)|vs (cupy|cuda.core) +interleaved' "$out/bench_attr.log" | sed 's/^/    /' | tee -a "$summary"
    ;;
  split)
    timed=/work/main/.device-build-timing/gpulab
    if [ ! -x "$timed" ]; then
      row "launch_split" "skipped" "no $timed: run tools/device_build.sh --timing"
    else
      for run in 1 2; do
        timeout 300 "$timed" tools/launch_split.lua >"$out/split_$run.log" 2>&1
        row "launch_split, process $run" "rc=$?" "see split_$run.log"
        grep -E '^[a-z]+, 4 arguments|^  (C loop|prepared|k:launch|host reference)' "$out/split_$run.log" | sed 's/^/    /' | tee -a "$summary"
      done
    fi
    ;;
  reports)
    mkdir -p "$out/reports"
    for lab in labs/*.lua; do
      name=$(basename "$lab" .lua)
      timeout 180 "$gl" "$lab" --quick --json "$out/reports/$name.json" --html "$out/reports/$name.html" \
        >"$out/reports/$name.log" 2>&1
      row "lab $name --quick --html" "rc=$?" "$(verdict_counts "$out/reports/$name.log")"
    done
    ;;
  hopper)
    (cd .device-build && ctest -R 'hopper' --output-on-failure --timeout 240) >"$out/ctest-hopper.log" 2>&1
    row "ctest -R hopper" "$([ $? = 0 ] && echo PASS || echo FAIL)" \
      "$(grep -E 'tests passed|tests failed' "$out/ctest-hopper.log" | tail -1)"
    three_runs hopper_clusters 120
    timeout 200 "$gl" tools/bench_launch.lua --quick >"$out/bench_launch_quick.log" 2>&1
    row "bench_launch --quick" "rc=$?" "$(grep -c ': MET' "$out/bench_launch_quick.log") targets met, $(grep -c ': MISSED' "$out/bench_launch_quick.log") missed"
    grep '^target' "$out/bench_launch_quick.log" | sed 's/^/    /' | tee -a "$summary"
    ;;
  sanitize)
    jobs=$out/sanitize-jobs.txt
    : >"$jobs"
    for tool in memcheck racecheck synccheck initcheck; do
      # illegal_access faults on purpose and runs the tools itself (its verdicts show them catching it)
      for lab in labs/*.lua; do
        case $lab in
        *illegal_access*) ;;
        # racecheck follows every shared-memory access: the TMA sweep at a small size
        *tma_double_buffer*) [ "$tool" = racecheck ] && echo "$tool $lab --quick --rows=256 --cols=2048 --reps=3" >>"$jobs" \
                               || echo "$tool $lab --quick" >>"$jobs" ;;
        *) echo "$tool $lab --quick" >>"$jobs" ;;
        esac
      done
      for t in tests/lua/gpu_*.lua; do
        case $t in *child*) ;; *) echo "$tool $t" >>"$jobs" ;; esac
      done
    done
    run_one() {
      tool=$1; shift
      name=$(basename "$1" .lua)
      timeout 540 "$gl" --sanitize="$tool" "$@" >"$out/san-$tool-$name.log" 2>&1
      echo "$tool $name $?"
    }
    export -f run_one; export gl out
    xargs -P 6 -L 1 bash -c 'run_one "$@"' _ <"$jobs" >"$out/sanitize-results.txt"
    for tool in memcheck racecheck synccheck initcheck; do
      total=$(grep -c "^$tool " "$out/sanitize-results.txt")
      bad=$(grep "^$tool " "$out/sanitize-results.txt" | awk '$3 != 0 {print $2 "(rc=" $3 ")"}' | tr '\n' ' ')
      errs=$(cat "$out"/san-"$tool"-*.log | grep -cE '^========= (Invalid|Race|Barrier|Uninitialized|Error)')
      row "compute-sanitizer $tool" "$([ -z "$bad" ] && echo PASS || echo FAIL)" \
        "$total runs, $errs tool reports${bad:+; failed: $bad}"
    done
    ;;
  leaks)
    for lab in labs/*.lua; do
      name=$(basename "$lab" .lua)
      timeout 300 "$gl" tools/lab_leakcheck.lua "$lab" --quick >"$out/leak-$name.log" 2>&1
      rc=$?
      row "device memory back after $name" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" \
        "$(grep -oE 'before [0-9.]+ MiB, after [0-9.]+ MiB \([^)]*\)' "$out/leak-$name.log")"
    done
    ;;
  cache)
    # a lab cold (empty compile cache) then warm, each in a fresh process
    rm -rf "$out/cache-coldwarm"
    for run in cold warm; do
      start=$(date +%s%N)
      GPULAB_CACHE_DIR=$out/cache-coldwarm timeout 300 "$gl" labs/tma_double_buffer.lua --quick >"$out/cache-$run.log" 2>&1
      rc=$?
      t=$(( ($(date +%s%N) - start) / 1000000 ))
      row "tma_double_buffer --quick, $run compile cache" "rc=$rc" "$t ms wall"
    done
    ;;
  stress)
    timeout 300 "$gl" tests/lua/stress_streams.lua >"$out/stress.log" 2>&1
    rc=$?
    row "stress: launches, frees and GC on 4 streams" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" \
      "$(tail -1 "$out/stress.log")"
    ;;
  lifetimes)
    timeout 400 "$gl" tools/stress_lifetimes.lua 100000 >"$out/lifetimes.log" 2>&1
    rc=$?
    row "stress_lifetimes 100,000 operations" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$(tail -1 "$out/lifetimes.log")"
    GPULAB_NO_WATCHDOG=1 timeout 200 "$gl" tools/stress_lifetimes.lua 20000 >"$out/lifetimes-nowatchdog.log" 2>&1
    rc=$?
    row "stress_lifetimes 20,000, no watchdog thread" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$(tail -1 "$out/lifetimes-nowatchdog.log")"
    ;;
  measure)
    timeout 300 "$gl" tools/measure_check.lua >"$out/measure.log" 2>&1
    rc=$?
    row "measure_check" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$(grep -c PASS "$out/measure.log") PASS, $(grep -c FAIL "$out/measure.log") FAIL lines"
    ;;
  profile)
    timeout 300 bash tools/profile_check.sh .device-build >"$out/profile.log" 2>&1
    rc=$?
    row "profile_check (cuda.profile vs ncu)" "rc=$rc" "$(grep -iE 'largest|FAILED' "$out/profile.log" | head -3 | tr '\n' ' ')"
    ;;
  hostref)
    timeout 200 "$gl" tools/bench_host_ref.lua >"$out/hostref.log" 2>&1
    rc=$?
    row "bench_host_ref 8192x8192 transpose" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" "$(grep -E 'transpose|loop' "$out/hostref.log" | head -3 | tr '\n' ' ')"
    ;;
  loader)
    lc=$(mktemp -d)
    env -u LD_LIBRARY_PATH GPULAB_CACHE_DIR="$lc" timeout 200 "$gl" labs/compile_pipeline.lua --quick >"$out/loader.log" 2>&1
    rc=$?
    row "lab with an empty compile cache, no LD_LIBRARY_PATH" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" \
      "$(grep -c NVRTC_ERROR "$out/loader.log") NVRTC errors; loader cache lists libnvrtc: $(ldconfig -p | grep -c libnvrtc.so)"
    ;;
  verdicts)
    timeout 560 bash tools/verdicts.sh "$gl" "$out/verdicts" >"$out/verdicts.log" 2>&1
    rc=$?
    row "verdicts: 3 quick + 1 full per lab" "rc=$rc" "$(tail -1 "$out/verdicts.log")"
    ;;
  esac
done

echo
cat "$summary"
exit 0

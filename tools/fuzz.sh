#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30) over its
# checked-in corpus (tests/fuzz/corpus/<target>); new inputs go to a scratch copy. Exits
# non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULAB_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fakecuda $(cd build-fuzz && ls -d ../tests/fuzz/fuzz_*.c | sed 's|.*/\(fuzz_[a-z]*\)\.c|\1|')
# intercept_tls_get_addr=0 as in tools/test.sh: LeakSanitizer's walk of dynamic TLS can crash in a
# process that has loaded libnvrtc, depending on the static TLS surplus glibc has left
export ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=halt_on_error=1
for src in tests/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c); name=${t#fuzz_}
  work=$(mktemp -d); cp -r tests/fuzz/corpus/"$name"/. "$work"/ 2>/dev/null || true
  echo "== $t for ${secs}s"
  log=$(mktemp)
  rc=0
  ./build-fuzz/"$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -print_final_stats=1 "$work" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then # the finding itself: the report and the input libFuzzer saved
    echo "$t: exit $rc; the end of its output:"
    tail -80 "$log"
    rm -rf "$work" "$log"
    exit "$rc"
  fi
  tail -4 "$log"
  rm -rf "$work" "$log"
done

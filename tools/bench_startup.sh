#!/bin/sh
# bench_startup.sh [GPULAB_BINARY] [N] — start-up time of `gpulab -e ''` next to `lua5.4 -e ''`.
# Each is started N times (default 200) in a row; prints milliseconds per start. The target is
# <= 5 ms for gpulab: nothing CUDA-related (driver, NVRTC) may be touched before a script asks.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/gpulab}
n=${2:-200}
if [ ! -x "$bin" ]; then
  echo "bench_startup: no gpulab binary at $bin (pass its path as the first argument)" >&2
  exit 1
fi

now_ns() { date +%s%N; }

# Runs "$@" n times; prints the mean milliseconds per run.
time_runs() {
  i=0
  start=$(now_ns)
  while [ "$i" -lt "$n" ]; do
    "$@" > /dev/null
    i=$((i + 1))
  done
  end=$(now_ns)
  echo "$start $end $n" | awk '{ printf "%.3f", ($2 - $1) / 1e6 / $3 }'
}

"$bin" -e '' # warm the page cache once
gl=$(time_runs "$bin" -e '')
printf 'gpulab -e %-4s %8s ms per start (%d runs)\n' "''" "$gl" "$n"
if command -v lua5.4 > /dev/null 2>&1; then
  lua=$(time_runs lua5.4 -e '')
  printf 'lua5.4 -e %-4s %8s ms per start (%d runs)\n' "''" "$lua" "$n"
else
  echo "lua5.4 not installed: no comparison"
fi
# also measured: the REPL-less run of a script that only loads the cuda module
gl_req=$(time_runs "$bin" -e 'local _ = require("cuda")')
printf 'gpulab -e %-4s %8s ms per start\n' "require" "$gl_req"
awk -v t="$gl" -v l="${lua:-0}" 'BEGIN { printf "target <= 5 ms: %s", (t <= 5.0 ? "met" : "NOT met"); if (l > 0) printf " (%.1fx lua5.4)", t / l; print "" }'

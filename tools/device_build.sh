#!/usr/bin/env bash
# Builds the tree into .device-build for a GPU machine (which has no Lua headers): Lua is
# linked statically, libcuda is opened at run time, NVRTC and libedit come from the machine.
# With --timing, builds .device-build-timing instead: the same with -DGPULAB_LAUNCH_TIMING=ON, for
# tools/device_run.sh's split part (carry both folders to have both).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.device-build timing=OFF
case ${1:-} in
  --timing) dir=.device-build-timing timing=ON ;;
  "") ;;
  *) echo "usage: tools/device_build.sh [--timing]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGPULAB_LAUNCH_TIMING=$timing >/dev/null
cmake --build "$dir" -j"$(nproc)"
git rev-parse --short HEAD >"$dir/COMMIT"
du -sh "$dir"

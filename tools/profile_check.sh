#!/bin/sh
# profile_check.sh — on a GPU machine: cuda.profile against ncu --clock-control none on the same
# kernels (a copy with known DRAM bytes, the warp_states chains), side by side with the relative
# differences, and the host cost of cuda.trace on a launch. The output is also kept in
# profile_check.txt. Exit status: gpulab's (1 when cuda.profile failed; CUPTI's error is printed).
#   tools/profile_check.sh [build-dir]
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
cd "$here" || exit 1
"$build/gpulab" tools/profile_check.lua >profile_check.txt 2>&1
rc=$?
cat profile_check.txt
exit $rc

#!/usr/bin/env bash
# Builds the tree into .device-build for a GPU machine (which has no Lua headers): Lua is
# linked statically, libcuda is opened at run time, NVRTC and libedit come from the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B .device-build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build .device-build -j"$(nproc)"
git rev-parse --short HEAD >.device-build/COMMIT
du -sh .device-build

#!/usr/bin/env bash
# Builds gpulab and runs every test (ctest: unit, Lua, CLI, REPL, stand-in driver; GPU tests
# are skipped without a device), then luacheck.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
luacheck --quiet lua labs tests
ctest --test-dir build --output-on-failure -j"$jobs"

#!/usr/bin/env bash
# Builds gpulab and runs every test: luacheck, then ctest (C unit tests, Lua tests, CLI and REPL
# tests, the driver stand-in; GPU tests report as skipped without a device), then the same CPU
# tests again on an AddressSanitizer + UndefinedBehaviorSanitizer build.
# GPULAB_TEST_QUICK=1 skips the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

luacheck --quiet lua labs tests tools

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULAB_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${GPULAB_TEST_QUICK:-0}" != 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGPULAB_SANITIZE=ON -DGPULAB_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  # intercept_tls_get_addr=0: LeakSanitizer's walk of dynamic TLS crashed ("Tracer caught signal
  # 11", a DTLS entry at address 0x97a) in a lab that compiles with NVRTC, depending on how much
  # static TLS surplus glibc had left for libnvrtc; heap leaks are still found, only pointers
  # held in dlopen'd libraries' TLS are no longer roots.
  export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:halt_on_error=1:intercept_tls_get_addr=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE 'gpu|nosan'
  # Each libFuzzer target for a bounded time over its checked-in corpus.
  tools/fuzz.sh "${GPULAB_FUZZ_SECONDS:-20}"
fi

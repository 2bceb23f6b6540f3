#!/bin/sh
# clang-tidy over bindings/ and host/ with the checks in .clang-tidy; exits 77 (skipped) when
# clang-tidy is not installed, 1 on any finding. Usage: tests/lint.sh BUILD_DIR (with
# compile_commands.json, which CMakeLists.txt exports).
set -u
cd "$(dirname "$0")/.."
build=$1
command -v clang-tidy >/dev/null 2>&1 || { echo "skipped: clang-tidy is not installed"; exit 77; }
[ -f "$build/compile_commands.json" ] || { echo "FAIL: $build/compile_commands.json is missing"; exit 1; }
out=$(mktemp)
status=0
for f in bindings/*.c host/*.c; do
  clang-tidy -p "$build" --quiet "$f" >>"$out" 2>/dev/null || status=1
done
findings=$(grep -c ': \(warning\|error\): ' "$out")
grep ': \(warning\|error\): ' "$out" | sort -u
rm -f "$out"
echo "clang-tidy: $findings finding(s) in bindings/ and host/"
[ "$status" = 0 ] && [ "$findings" = 0 ]

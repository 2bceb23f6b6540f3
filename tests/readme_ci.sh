#!/bin/sh
# README.md's two set-up commands and .ci/run agree: .ci/run reads its package list from the
# README's test command (so that command must stay in the form it parses), the build command's
# packages are among them, CI runs the same tools/test.sh, and the README names the binary.
set -u
cd "$(dirname "$0")/.."
fail() { echo "FAIL: $*"; exit 1; }
test_pkgs=$(.ci/run --packages) || fail ".ci/run cannot read the README's test command"
build_pkgs=$(sed -n 's/^apt-get update && apt-get install -y \([a-z0-9. +-]*\) && cmake -S \. -B build && .*/\1/p' README.md)
[ -n "$build_pkgs" ] || fail "README.md has no build command 'apt-get update && apt-get install -y ... && cmake -S . -B build && ...'"
for p in $build_pkgs; do
  case " $test_pkgs " in *" $p "*) ;; *) fail "the build command installs $p, the test command does not" ;; esac
done
grep -q '^\./tools/test\.sh$' .ci/run || fail ".ci/run does not run ./tools/test.sh"
grep -q '&& \./build/gpulab labs/[a-z_]*\.lua$' README.md || fail "the README's build command does not run ./build/gpulab"
echo "README build command: $build_pkgs"
echo "README test command and .ci/run: $test_pkgs"

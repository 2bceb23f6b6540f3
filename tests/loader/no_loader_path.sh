#!/bin/sh
# Runs a Lua test in a mount namespace whose loader cache lists no folder holding libnvrtc (the
# system's own loader configuration minus those folders), with LD_LIBRARY_PATH unset and an empty
# compile cache: what a machine with the CUDA toolkit installed by runfile, tarball or pip sees.
# Usage: no_loader_path.sh GPULAB TEST.lua   (environment passed through to the test)
# Where the system's loader cache lists no libnvrtc anyway, the test runs directly. Exit 77
# (skipped) where it does and a private mount namespace cannot be made (not root, unshare refused).
set -eu
gpulab=$1 test=$2
if [ "${GL_INSIDE_NAMESPACE:-}" = 1 ]; then
  if [ -e /etc/ld.so.cache ]; then mount --bind "$GL_LOADER_CACHE" /etc/ld.so.cache; fi
  listed=$(ldconfig -p | grep -c 'libnvrtc' || true)
  if [ "$listed" != 0 ]; then
    echo "FAIL: the loader cache in the namespace still lists $listed libnvrtc entries"; exit 1
  fi
  unset LD_LIBRARY_PATH GL_INSIDE_NAMESPACE GL_LOADER_CACHE
  echo "loader cache without libnvrtc, LD_LIBRARY_PATH unset, compile cache $GPULAB_CACHE_DIR (empty)"
  exec "$gpulab" "$test"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpulab-noldpath.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/compile-cache"
# Where the loader cache lists no libnvrtc already (a fresh root, a tarball install), no namespace
# is needed: the test runs as it is.
if [ "$(ldconfig -p | grep -c libnvrtc || true)" = 0 ]; then
  echo "the system's loader cache lists no libnvrtc; LD_LIBRARY_PATH unset, compile cache empty"
  env -u LD_LIBRARY_PATH GPULAB_CACHE_DIR="$work/compile-cache" GL_TEST_TMP="$work" "$gpulab" "$test"
  exit
fi
if [ "$(id -u)" != 0 ]; then echo "skipped: the loader cache lists libnvrtc and hiding it (unshare -m) needs root"; exit 77; fi
if ! command -v unshare >/dev/null; then echo "skipped: unshare not found"; exit 77; fi
if ! unshare -m --propagation private true 2>"$work/err"; then
  echo "skipped: unshare -m --propagation private refused: $(cat "$work/err")"; exit 77
fi

# The folders the system's loader configuration names, without those that hold libnvrtc.
ldconfig -v -N 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p' | while read -r dir; do
  if ls "$dir"/libnvrtc* >/dev/null 2>&1; then echo "left out of the loader cache: $dir" >&2
  else echo "$dir"; fi
done >"$work/ld.so.conf"
ldconfig -X -C "$work/ld.so.cache" -f "$work/ld.so.conf"
GL_INSIDE_NAMESPACE=1 GL_LOADER_CACHE=$work/ld.so.cache GPULAB_CACHE_DIR=$work/compile-cache GL_TEST_TMP=$work \
  unshare -m --propagation private sh "$0" "$gpulab" "$test"

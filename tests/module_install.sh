#!/bin/sh
# module_install.sh BUILD PREFIX LUA CMOD LMOD DATA — `cmake --install` into a temporary prefix,
# then Lua 5.4's own interpreter with that prefix's module folders (CMOD, LMOD: relative to it) as its
# only paths, as lua5.4's defaults name /usr/local's, run from an unrelated folder: require
# "cuda" opens the installed cuda.so, cuda.home is the installed data folder, a compile includes
# the installed gpulab/ headers, require "gpulab.lab" and help() read the installed files.
set -eu
build=$1
prefix=$2
lua=$3
cmod=$prefix/$4
lmod=$prefix/$5
data=$prefix/$6
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
test -f "$cmod/cuda.so"
test -f "$lmod/gpulab/lab.lua"
if [ -e "$lmod/gpulab/meta" ]; then echo "the editor stub was installed on the Lua path" >&2; exit 1; fi
cd /
out=$(env -u GPULAB_HOME -u LUA_INIT -u LUA_INIT_5_4 GPULAB_CACHE_DIR="$prefix/cache" \
  LUA_CPATH_5_4="$cmod/?.so" LUA_PATH_5_4="$lmod/?.lua" "$lua" -e 'require "cuda"' -e '
  print(package.searchpath("cuda", package.cpath))
  print(cuda.home)
  print(package.searchpath("gpulab.lab", package.path))
  print(type(require("gpulab.lab").new))
  local prog = cuda.compile("#include <gpulab/tma.cuh>\n__global__ void k() {}", { cache = false })
  print(prog.ptx:find(".entry", 1, true) ~= nil)
  print(require("gpulab.help").text(cuda.compile):find("cuda.compile(", 1, true) ~= nil)')
expected="$cmod/cuda.so
$(cd "$data" && pwd -P)
$lmod/gpulab/lab.lua
function
true
true"
if [ "$out" != "$expected" ]; then
  printf 'lua5.4 with the installed module printed:\n%s\nexpected:\n%s\n' "$out" "$expected" >&2
  exit 1
fi
rm -rf "$prefix"
echo "module install test passed"

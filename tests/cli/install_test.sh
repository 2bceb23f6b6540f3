#!/bin/sh
# Installs gpulab into a temporary prefix and checks that the installed binary finds its lua/
# folder (share/gpulab/lua, searched after package.path, which stays lua's) when run from an
# unrelated directory.
set -eu
build=$1
prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
bin="$prefix/bin/gpulab"
test -x "$bin"
# a module placed in the installed lua/ folder must be found by require
mkdir -p "$prefix/share/gpulab/lua"
echo "return 'installed module'" > "$prefix/share/gpulab/lua/gl_install_probe.lua"
cd /
out=$(env -u GPULAB_HOME "$bin" -e '
  print(cuda.home)
  print((require("gl_install_probe")))
  print(package.path:find(cuda.home, 1, true) == nil)
  print(require("cuda") == cuda)')
expected="$(cd "$prefix/share/gpulab" && pwd -P)
installed module
true
true"
if [ "$out" != "$expected" ]; then
  printf 'installed gpulab printed:\n%s\nexpected:\n%s\n' "$out" "$expected" >&2
  exit 1
fi
# the installed binary runs a script and reports errors the same way
printf 'print("script ok", ...)\n' > "$prefix/s.lua"
test "$("$bin" "$prefix/s.lua" 1)" = "script ok	1"
if "$bin" -e 'error("installed error")' 2> "$prefix/err.txt"; then exit 1; fi
grep -q '(command line):1: installed error' "$prefix/err.txt"
rm -rf "$prefix"
echo "install test passed"

#!/usr/bin/env bash
# lua_suite.sh — runs Lua 5.4's own test suite (the `testes` folder of the Lua 5.4.4 sources, not
# part of this repository) under gpulab, one file at a time, and reports each file's result.
#
#   tools/lua_suite.sh [--gpulab BIN] [--ref LUA | --no-ref] [--soft] [--timeout SECONDS] TESTES [FILE...]
#
# Each file runs as all.lua would run it: in the testes folder, with all.lua's globals (_soft, _port,
# _nomsg, ARG, Message; `debug` and `T` unset) and all.lua's own check of what the file returns
# (attrib.lua returns 27, big.lua yields 'b' and 'a' to a coroutine, ...). The one difference is
# all.lua's string.dump/load round trip: gpulab loads text only (docs/LUA_DIFFERENCES.md), so each
# file is loaded from its text. The same command line runs under the reference interpreter (lua5.4
# by default) beside it, so a file that fails on this machine whatever the interpreter (a missing
# locale, a missing C compiler) is told apart from a difference of gpulab's.
#
# The C libraries attrib.lua loads (testes/libs/*.so) are built with the Lua 5.4 headers when
# they are missing. Exit status: 0 when every file gpulab ran passed or failed under the reference
# too, 1 otherwise. Per-file output is kept in $LUA_SUITE_LOGS (default: a temporary folder).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
gpulab=${GPULAB_BIN:-$root/build/gpulab}
ref=lua5.4
soft=false
limit=900
while [ $# -gt 0 ]; do
  case $1 in
    --gpulab) gpulab=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    --no-ref) ref=; shift ;;
    --soft) soft=true; shift ;;
    --timeout) limit=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "lua_suite.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ] || [ ! -f "$1/all.lua" ]; then
  echo "usage: tools/lua_suite.sh [options] TESTES_FOLDER [FILE...]  (the folder holds all.lua)" >&2
  exit 2
fi
testes=$(cd "$1" && pwd)
shift
gpulab=$(cd "$(dirname "$gpulab")" && pwd)/$(basename "$gpulab")
[ -x "$gpulab" ] || { echo "lua_suite.sh: no gpulab at $gpulab (--gpulab BIN)" >&2; exit 2; }
if [ -n "$ref" ] && ! command -v "$ref" >/dev/null; then
  echo "lua_suite.sh: no reference interpreter '$ref'; running gpulab alone" >&2
  ref=
fi
logs=${LUA_SUITE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"

# all.lua's order; heavy.lua (exhausts memory on purpose) and the helper modules are not run by all.lua.
files=(main gc db calls strings literals tpack attrib gengc locals constructs code big cstack nextvar pm
       utf8 api events vararg closure coroutine goto errors math sort bitwise verybig files)
[ $# -gt 0 ] && files=("${@%.lua}")

# Sections skipped, as line ranges of Lua 5.4.4's files, blanked (line numbers kept) when the file
# is loaded, under both interpreters alike:
#  - binary chunks (string.dump and back), which gpulab refuses by design (docs/LUA_DIFFERENCES.md);
#    the checks that a binary chunk is refused in text mode ('t') are kept;
#  - main.lua 343-347, the output of a non-string prompt: it expects GNU readline's echo of piped
#    input; Lua 5.4.4's lua.c built without readline (the release's default `make linux`) prints
#    "123" there, as gpulab does, and fails it too (the command itself still runs and must succeed);
#  - main.lua 401-403 and 439, gpulab's documented options: `-v` prints gpulab's version line after
#    Lua's (the check wants the -e output right after Lua's), and `-h` is gpulab's --help.
skips_for() {
  case $1 in
    calls) echo "315-317 320-327 331-332 352-356 374-377 381-395 412-418 438-478" ;;
    db) echo "981-1036" ;;
    errors) echo "253-266" ;;
    files) echo "551-557 559-568 570-577" ;;
    main) echo "343-347 401-403 439" ;;
  esac
}
# git's blob names of those files in Lua 5.4.4: the line ranges hold for these texts only.
blob_for() {
  case $1 in
    calls) echo ff72d8f6cfd4c05e5ebf94d58cfac67ca4b0af27 ;;
    db) echo f891e9b8ddce6d75c58f52688735409a5667f1fb ;;
    errors) echo 55bdab829e03d3a8f10c86034c07600964618a34 ;;
    files) echo 16cf9b6a947eaf452360c139369b3b7da53e19f5 ;;
    main) echo 9def63860dd6226d31e5efd10d6e5f9a9a671271 ;;
  esac
}

# The expression that loads FILE: dofile, or its text with the skipped sections blanked.
loader_for() {
  local ranges
  ranges=$(skips_for "$1")
  if [ -z "$ranges" ]; then echo "dofile('$1.lua')"; return; fi
  # shellcheck disable=SC2028 # the \\n are Lua's, written as they stand
  echo "(function (name, skip)
  local f = assert(io.open(name, 'rb')); local text = f:read('a'); f:close()
  local lines, n = {}, 0
  for line in (text .. '\\n'):gmatch('(.-)\\n') do
    n = n + 1; lines[n] = (n == 1 and line:find('^#')) and '' or line  -- loadfile skips a '#' line
    for _, r in ipairs(skip) do if n >= r[1] and n <= r[2] then lines[n] = '' end end
  end
  return assert(load(table.concat(lines, '\\n'), '@' .. name))()
end)('$1.lua', {$(for r in $ranges; do printf '{%s,%s},' "${r%-*}" "${r#*-}"; done)})"
}

# The check all.lua makes of each file's result.
check_for() {
  local load
  load=$(loader_for "$1")
  case $1 in
    calls) echo "assert($load == deep and deep)" ;;
    attrib) echo "assert($load == 27)" ;;
    locals) echo "assert($load == 5)" ;;
    events) echo "assert($load == 12)" ;;
    verybig) echo "assert($load == 10); collectgarbage()" ;;
    big) echo "if not _soft then local f = coroutine.wrap(assert(loadfile('big.lua')));" \
              "assert(f() == 'b'); assert(f() == 'a') end" ;;
    *) echo "$load" ;;
  esac
}

prelude="_soft = $soft; _port = false; _nomsg = false; _G.ARG = arg; debug = nil; T = nil
function Message (m) if not _nomsg then print(m) end end
assert(os.setlocale'C')"

# attrib.lua's C libraries, as testes/libs/makefile builds them, against the installed headers.
build_libs() {
  local inc
  inc=$(pkg-config --cflags lua5.4 2>/dev/null) || inc=-I/usr/include/lua5.4
  [ -f "$testes/libs/lib1.so" ] && return 0
  command -v cc >/dev/null || return 1
  # shellcheck disable=SC2086 # $inc is a list of compiler flags
  (cd "$testes/libs" &&
   for l in lib1 lib11 lib2 lib21; do cc -Wall -std=gnu99 -O2 $inc -fPIC -shared -o $l.so $l.c || exit 1; done &&
   cc -Wall -std=gnu99 -O2 $inc -fPIC -shared -o lib2-v2.so lib22.c)
}
build_libs || echo "lua_suite.sh: attrib.lua's C libraries could not be built (its loadlib section is skipped)" >&2

# run INTERPRETER FILE LOG: 0 on success, else the exit status (124 past the time limit).
run() {
  (cd "$testes" && timeout --signal=INT --kill-after=10 "$limit" "$1" -e "$prelude" -e "$(check_for "$2")") \
    >"$3" 2>&1 < <(:)
}

verdict() { case $1 in 0) echo pass ;; 124|137) echo "timeout" ;; *) echo "fail($1)" ;; esac; }

printf '%-12s %-10s %-10s %s\n' file gpulab "${ref:-ref}" seconds
bad=0
for f in "${files[@]}"; do
  if [ ! -f "$testes/$f.lua" ]; then
    printf '%-12s %s\n' "$f" "no such file"
    bad=1
    continue
  fi
  if [ -n "$(skips_for "$f")" ] && command -v git >/dev/null &&
     [ "$(git hash-object "$testes/$f.lua")" != "$(blob_for "$f")" ]; then
    echo "lua_suite.sh: $f.lua is not Lua 5.4.4's: the binary-chunk sections skipped may be the wrong lines" >&2
  fi
  t0=$(date +%s)
  run "$gpulab" "$f" "$logs/$f.gpulab.log"
  g=$?
  t1=$(date +%s)
  r=-
  if [ -n "$ref" ]; then
    run "$ref" "$f" "$logs/$f.ref.log"
    r=$?
  fi
  rv=-
  [ "$r" = - ] || rv=$(verdict "$r")
  printf '%-12s %-10s %-10s %s\n' "$f" "$(verdict $g)" "$rv" $((t1 - t0))
  if [ $g != 0 ] && { [ "$r" = - ] || [ "$r" = 0 ]; }; then
    bad=1
    tail -n 15 "$logs/$f.gpulab.log" | sed 's/^/    /'
  fi
done
echo "logs: $logs"
exit $bad

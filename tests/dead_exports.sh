#!/bin/sh
# dead_exports.sh NM OBJECT_OR_ARCHIVE... — fails naming every global symbol that one object
# file defines and no other object file uses: such a function or variable should be static (or
# gone). The objects given are the whole program: both libraries and main's object.
nm=$1; shift
tmp=${TMPDIR:-/tmp}/dead_exports.$$
trap 'rm -f "$tmp".*' EXIT
# "object symbol" for every definition and every use; nm -A prefixes each line with
# "archive:member:" or "object:" (the address, if any, follows the last colon).
"$nm" -A --defined-only --extern-only "$@" 2>/dev/null |
  awk 'NF >= 2 && $(NF-1) ~ /^[TDBRVWGS]$/ { o = $1; sub(/:[^:]*$/, "", o); print o, $NF }' |
  sort -u > "$tmp.def"
"$nm" -A --undefined-only "$@" 2>/dev/null |
  awk 'NF >= 2 && $(NF-1) == "U" { o = $1; sub(/:[^:]*$/, "", o); print o, $NF }' | sort -u > "$tmp.use"
[ -s "$tmp.def" ] || { echo "dead_exports: no symbols read from $*" >&2; exit 2; }
dead=0
while read -r obj sym; do
  # main, the Lua API, and names the toolchain makes (__odr_asan.*, __gcov_*) are not ours to judge
  case $sym in main|luaopen_*|lua_*|luaL_*|__*) continue ;; esac
  if ! awk -v s="$sym" -v o="$obj" '$2 == s && $1 != o { found = 1 } END { exit !found }' "$tmp.use"; then
    echo "dead export: $sym (defined in $obj, used by no other object)"
    dead=$((dead + 1))
  fi
done < "$tmp.def"
[ "$dead" -eq 0 ] || { echo "dead_exports: $dead symbol(s)" >&2; exit 1; }
echo "dead_exports: every exported symbol has a user in another object"

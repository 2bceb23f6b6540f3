#!/bin/sh
# layers_compile.sh CC SOURCE_DIR -I... — compiles every bindings/*.c and every bindings/*.h on
# its own (-fsyntax-only) with the bindings' include path alone (no host/ folder): each file
# compiles without the host, and each header includes what it needs. As a control, a file that
# includes host.h must fail to compile with that path (else the test could not fail).
cc=$1; src=$2; shift 2
tmp=${TMPDIR:-/tmp}/layers_compile.$$
mkdir -p "$tmp" && trap 'rm -rf "$tmp"' EXIT
fail=0
for f in "$src"/bindings/*.c; do
  "$cc" -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -DGPULAB_VERSION='"0"' "$@" "$f" 2>"$tmp/err" ||
    { echo "FAIL: $f does not compile without host/ on the include path:"; head -5 "$tmp/err"; fail=1; }
done
# the launch timing of -DGPULAB_LAUNCH_TIMING=ON builds (tools/launch_split.lua) compiles too
"$cc" -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -DGL_LAUNCH_TIMING "$@" "$src/bindings/launch.c" 2>"$tmp/err" ||
  { echo "FAIL: bindings/launch.c does not compile with GL_LAUNCH_TIMING:"; head -5 "$tmp/err"; fail=1; }
for h in "$src"/bindings/*.h; do
  printf '#include "%s"\n' "$(basename "$h")" > "$tmp/one.c"
  "$cc" -std=gnu11 -fsyntax-only -Wall -Wextra -Werror "$@" "$tmp/one.c" 2>"$tmp/err" ||
    { echo "FAIL: $h does not compile on its own:"; head -5 "$tmp/err"; fail=1; }
done
printf '#include "host.h"\n' > "$tmp/control.c"
if "$cc" -fsyntax-only "$@" "$tmp/control.c" 2>/dev/null; then
  echo "FAIL: host.h is reachable from the bindings' include path"; fail=1
fi
[ "$fail" -eq 0 ] && echo "layers_compile: bindings/ compiles without host/; every header stands alone"
exit "$fail"

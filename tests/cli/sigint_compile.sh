#!/bin/sh
# sigint_compile.sh GPULAB [PTY_EXPECT] — SIGINT and SIGTERM while NVRTC compiles. NVRTC installs
# handlers of its own for the compile that call exit(4) from signal context: gpulab ended with
# status 4 (Release) or hung in LeakSanitizer's exit check (ASan+UBSan). Now Ctrl-C raises
# "interrupted!" once the compile returns, and SIGTERM ends gpulab by that signal; with PTY_EXPECT
# (tests/pty/pty_expect.c) a REPL session also goes on after a Ctrl-C mid-compile. Run under
# tests/deadline.sh: a hang fails the test at its deadline instead of stalling CI.
gpulab=$1
pty_expect=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "sigint_compile: $*" >&2; echo "--- stderr:" >&2; cat "$tmp/err" >&2; exit 1; }

# A kernel whose front end (template instantiation) takes a while; no GPU or driver needed.
cat >"$tmp/big.lua" <<'EOF'
local src = { "template<int N> __device__ float f(float x) { return f<N-1>(x) * 1.0001f + (float)N; }",
              "template<> __device__ float f<0>(float x) { return x; }" }
for i = 1, 2 do
  src[#src + 1] = ("extern \"C\" __global__ void k%d(float *p) { float v = p[threadIdx.x];\n" ..
    "#pragma unroll\nfor (int i = 0; i < 64; i++) v = f<200>(v) + __sinf(v * i);\np[threadIdx.x] = v; }"):format(i)
end
cuda.compile(table.concat(src, "\n"), { name = "big.cu", arch = "sm_90" })
print("compile returned")
EOF

# The ignored and blocked signals of process $1's main thread, as "SigIgn SigBlk" (hex), or nothing
# once it has ended.
masks() {
  awk '/^SigIgn:/ { i = $2 } /^SigBlk:/ { b = $2 } END { if (b != "") print i, b }' "/proc/$1/status" 2>/dev/null
}

# Process $1's state: "held" inside a compile that gpulab holds (bindings/sighold.c: for the whole
# nvrtcCompileProgram call the main thread blocks SIGINT and SIGTERM and SIGINT is ignored), "nvrtc"
# when NVRTC's own actions are in place as well, "other" outside a compile, nothing once it has ended.
# Measured with NVRTC 13.0: NVRTC's actions (SIGXFSZ ignored, with a SIGTERM handler in the same
# moments) last only the first tens of milliseconds of a compile of seconds. (The REPL catches
# SIGTERM itself, so SIGXFSZ is what tells NVRTC's moments apart.)
compile_state() {
  # shellcheck disable=SC2046 # two hex words
  set -- $(masks "$1")
  [ $# = 2 ] || return 0
  if [ $((0x$2 & 0x4002)) != $((0x4002)) ] || [ $((0x$1 & 0x2)) = 0 ]; then echo other
  elif [ $((0x$1 & 0x1000000)) != 0 ]; then echo nvrtc
  else echo held; fi
}

# Waits until process $1 is in a held compile. With "past_nvrtc", only past NVRTC's moments (seen
# twice, 0.3 s apart): setting and undoing SIG_IGN for SIGINT, as NVRTC does then, discards a
# pending SIGINT that gpulab's catcher thread has not taken yet, and on a loaded machine the catcher
# can wait that long for a CPU. SIGTERM is never discarded so, and goes at the first sight of the
# hold, NVRTC's moments included. The hold lasts the whole compile, so slow polling on a loaded
# machine still finds it; an earlier version watched for NVRTC's brief SIGXFSZ alone and missed
# every one of 20 compiles under load.
wait_held_compile() {
  tries=0
  while :; do
    state=$(compile_state "$1")
    [ -n "$state" ] || fail "gpulab ended before a held compile was seen"
    if [ "$2" != past_nvrtc ] && [ "$state" != other ]; then return 0; fi
    if [ "$state" = held ]; then
      sleep 0.3
      [ "$(compile_state "$1")" = held ] && return 0
    fi
    tries=$((tries + 1))
    [ $tries -lt 4000 ] || fail "no held compile seen within 200 s"
    sleep 0.05
  done
}

# Starts the compile, sends signal $1 while it is held; returns the exit status.
signal_mid_compile() {
  GPULAB_CACHE=0 GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gpulab" "$tmp/big.lua" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  if [ "$1" = INT ]; then wait_held_compile "$pid" past_nvrtc; else wait_held_compile "$pid"; fi
  kill "-$1" "$pid"
  wait "$pid"
}

signal_mid_compile INT
rc=$?
[ $rc = 1 ] || fail "SIGINT mid-compile: exit status $rc, expected 1 (4: NVRTC's handler ended gpulab)"
grep -q "interrupted!" "$tmp/err" || fail "SIGINT mid-compile: no 'interrupted!'"
grep -q "compile returned" "$tmp/out" && fail "SIGINT mid-compile: the script went on after the compile"

signal_mid_compile TERM
rc=$?
[ $rc = 143 ] || fail "SIGTERM mid-compile: exit status $rc, expected 143 (death by SIGTERM; 4: NVRTC's handler)"

[ -n "$pty_expect" ] || { echo "sigint_compile: SIGINT -> interrupted!, SIGTERM -> 143"; exit 0; }

# The REPL: the session goes on, the next input runs. The input compiles again and again, so a
# compile the polling misses (a loaded machine) is followed by another; the first Ctrl-C ends the loop.
cat >"$tmp/session.pty" <<PTY
timeout 180
input for _ = 1, 20 do dofile("$tmp/big.lua") end
expect interrupted!
input =6*7
expect \\n42\\n
key \\x04
exit 0
PTY
TERM=xterm XDG_STATE_HOME="$tmp/state" GPULAB_CACHE=0 GPULAB_LIBCUDA=/nonexistent/libcuda.so \
  "$pty_expect" "$tmp/session.pty" "$gpulab" >"$tmp/err" 2>&1 &
driver=$!
tries=0
until pid=$(pgrep -P "$driver" | head -n 1) && [ -n "$pid" ]; do
  tries=$((tries + 1))
  [ $tries -lt 600 ] || fail "the REPL did not start"
  sleep 0.05
done
wait_held_compile "$pid" past_nvrtc
kill -INT "$pid"
wait "$driver" || fail "REPL: the session did not go on after a Ctrl-C mid-compile"
echo "sigint_compile: SIGINT -> interrupted!, SIGTERM -> 143, the REPL goes on"

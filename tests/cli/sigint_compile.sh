#!/bin/sh
# sigint_compile.sh GPULAB [PTY_EXPECT] — SIGINT and SIGTERM while NVRTC's front end compiles. NVRTC installs
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

# Waits until process $1 is in NVRTC's front end (it ignores SIGXFSZ while it compiles), then a
# moment more. The bit is set as the compile starts, next to NVRTC's own signal(SIGINT, SIG_IGN),
# which discards a SIGINT still pending: one sent at once could land in that instant and be lost
# before gpulab's catcher thread takes it (bindings/sighold.c), which a loaded CI machine made
# likely enough to hang the REPL case until its timeout. The front end lasts seconds here.
wait_front_end() {
  tries=0
  while :; do
    ign=$(awk '/^SigIgn:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
    [ -n "$ign" ] || fail "gpulab ended before NVRTC's front end was seen"
    [ $((0x$ign & 0x1000000)) -ne 0 ] && break
    tries=$((tries + 1))
    [ $tries -lt 4000 ] || fail "NVRTC's front end not seen within 200 s"
    sleep 0.05
  done
  sleep 0.2
}

# Starts the compile, sends signal $1 in NVRTC's front end; returns the exit status.
signal_mid_compile() {
  GPULAB_CACHE=0 GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gpulab" "$tmp/big.lua" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  wait_front_end "$pid"
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
# front end missed by the polling (a loaded machine: the REPL's first compile ran to its end before
# the bit was seen) is followed by another; the first Ctrl-C ends the loop.
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
wait_front_end "$pid"
kill -INT "$pid"
wait "$driver" || fail "REPL: the session did not go on after a Ctrl-C mid-compile"
echo "sigint_compile: SIGINT -> interrupted!, SIGTERM -> 143, the REPL goes on"

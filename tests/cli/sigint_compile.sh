#!/bin/sh
# sigint_compile.sh GPULAB — SIGINT and SIGTERM while NVRTC's front end compiles. NVRTC installs
# handlers of its own for the compile that call exit(4) from signal context: gpulab ended with
# status 4 (Release) or hung in LeakSanitizer's exit check (ASan+UBSan). Now Ctrl-C raises
# "interrupted!" once the compile returns, and SIGTERM ends gpulab by that signal. Run under
# tests/deadline.sh: a hang fails the test at its deadline instead of stalling CI.
gpulab=$1
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

# Starts the compile, waits for NVRTC's front end (it ignores SIGXFSZ while it compiles), sends
# the signal; returns the exit status.
signal_mid_compile() {
  GPULAB_CACHE=0 GPULAB_LIBCUDA=/nonexistent/libcuda.so "$gpulab" "$tmp/big.lua" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  tries=0
  while :; do
    ign=$(awk '/^SigIgn:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    [ -n "$ign" ] || fail "gpulab ended before NVRTC's front end was seen"
    [ $((0x$ign & 0x1000000)) -ne 0 ] && break
    tries=$((tries + 1))
    [ $tries -lt 6000 ] || fail "NVRTC's front end not seen within 300 s"
    sleep 0.05
  done
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
echo "sigint_compile: SIGINT -> interrupted!, SIGTERM -> 143"

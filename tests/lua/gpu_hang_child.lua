-- Child process for gpu_stream.lua: a kernel that waits for a flag nobody sets is caught by
-- s:sync{timeout=1}. The kernel gives up by itself after 10 s of %globaltimer, so the GPU is
-- never held for ever; after the timeout the child also sets the flag to end it at once.
-- Prints WAITED <s>, TIMEOUT <message>, ENDED <bool>, WHY <1 released | 2 gave up>.
local SRC = [[
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void spin_until_flag(volatile unsigned *flag, unsigned long long limit_ns,
                                           unsigned *why) {
  unsigned long long t0 = global_ns();
  while (*flag == 0u) {
    if (global_ns() - t0 > limit_ns) { *why = 2u; return; }
  }
  *why = 1u;
}
]]

local mod = cuda.load(cuda.compile(SRC, { name = "gpu_hang_child.cu" }))
local flag, why = cuda.array("u32", 1), cuda.array("u32", 1)
flag:fill(0); why:fill(0)
cuda.sync()
local s = cuda.stream { nonblocking = true }
mod:kernel("spin_until_flag"):launch({ grid = 1, block = 1, stream = s }, flag, 10 * 1000000000, why)
local t0 = cuda.now()
local ok, err = pcall(s.sync, s, { timeout = 1 })
print(string.format("WAITED %.3f", cuda.now() - t0))
print((ok and "NO TIMEOUT " or "TIMEOUT ") .. tostring(err))
io.stdout:flush()
-- A timeout poisons nothing: set the flag from the host. The copy goes through the legacy
-- default stream, which does not wait for a non-blocking stream.
local one = cuda.host("u32", 1)
one[1] = 1
local ended = pcall(flag.copy_from, flag, one) and pcall(s.sync, s, { timeout = 15 })
print("ENDED " .. tostring(ended))
if ended then
  local h = cuda.host("u32", 1)
  h:copy_from(why)
  print("WHY " .. h[1])
end
io.stdout:flush()
-- if it still runs, leave without finalizers waiting for it (the driver tears it down)
os.exit(ok and 1 or 0, ended)

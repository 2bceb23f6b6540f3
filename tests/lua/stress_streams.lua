-- Stress: 10,000 launches on 4 streams, each writing into a fresh array that the script drops at
-- once (so most frees are deferred while the work runs), with collections forced at random
-- points and every 100th result checked. Ends with everything freed and the device's free
-- memory back where it started. Usage: gpulab tests/lua/stress_streams.lua [launches]
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local LAUNCHES = tonumber(arg[1]) or 10000
local N = 4096

local mod = cuda.load(cuda.compile([[
extern "C" __global__ void fill_index(float *out, int n, float base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + (float)i;
}
]], { name = "stress.cu" }))
local k = mod:kernel("fill_index")

collectgarbage(); collectgarbage(); cuda.sync()
local free0 = cuda.mem_info()

T.test("launches interleaved with frees and collections", function()
  local streams = {}
  for i = 1, 4 do streams[i] = cuda.stream { nonblocking = i % 2 == 0 } end
  local rng = 12345
  local checked = 0
  for i = 1, LAUNCHES do
    local s = streams[i % 4 + 1]
    local a = cuda.array("f32", N)
    k:launch({ grid = N // 256, block = 256, stream = s }, a, N, i)
    if i % 100 == 0 then
      local h = cuda.host("f32", N)
      h:copy_from(a, s)
      s:sync { timeout = 10 }
      for j = 1, N, 511 do T.eq(h[j], i + (j - 1), "launch " .. i .. " element " .. j) end
      checked = checked + 1
    elseif i % 7 == 0 then
      a:free() -- explicit free while the launch may still be running
    end
    rng = (rng * 1103515245 + 12345) % 2147483648
    if rng % 50 == 0 then collectgarbage() end
  end
  cuda.sync { timeout = 30 }
  T.eq(checked, LAUNCHES // 100)
end)

T.test("everything released, device memory back", function()
  collectgarbage(); collectgarbage(); cuda.sync()
  local s = cuda.stats()
  T.eq(s.arrays, 0, "arrays"); T.eq(s.streams, 0, "streams"); T.eq(s.deferred, 0, "deferred")
  local free1 = cuda.mem_info()
  T.ok(math.abs(free1 - free0) <= 4 * 1024 * 1024, string.format("free memory %d -> %d", free0, free1))
end)

T.done()

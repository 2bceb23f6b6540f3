-- test_cache_gpu.lua — compiled and cached programs run correctly on the device: the default arch
-- is the device's, a cold and a warm run in separate processes give the same correct results,
-- a virtual-arch (PTX only) program JIT-loads, and a cached compile + load is fast.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local gpulab = arg[-1]
local scratch = os.tmpname()
os.remove(scratch)
assert(os.execute("mkdir -p '" .. scratch .. "'"))

local SRC = [[
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <int N> __global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= N;
}
]]

-- Compiles (opts), loads, runs saxpy then scale<3> on n elements and checks every element.
local function check_program(prog, n)
  local mod = cuda.load(prog)
  local x, y = cuda.host("f32", n), cuda.host("f32", n)
  x:random { seed = 7, lo = -2, hi = 2 }
  y:random { seed = 8, lo = -2, hi = 2 }
  local want = cuda.host("f32", n)
  for i = 1, n do want[i] = (2.5 * x[i] + y[i]) * 3 end
  local dx, dy = cuda.array("f32", n), cuda.array("f32", n)
  dx:copy_from(x)
  dy:copy_from(y)
  local blocks = (n + 255) // 256
  mod:kernel("saxpy"):launch({ grid = blocks, block = 256 }, 2.5, dx, dy, n)
  mod:kernel("scale<3>"):launch({ grid = blocks, block = 256 }, dy, n)
  cuda.sync()
  local got = cuda.host("f32", n)
  got:copy_from(dy)
  local r = cuda.compare(got, want, { atol = 1e-5, rtol = 1e-5 })
  dx:free()
  dy:free()
  return r.mismatches, r
end

T.test("default arch is the device's", function()
  local dev = cuda.device(0)
  local want = (dev.cc[1] == 9 and dev.cc[2] == 0) and "sm_90a" or string.format("sm_%d%d", dev.cc[1], dev.cc[2])
  local p = cuda.compile(SRC, { names = { "scale<3>" }, cache = false })
  T.eq(p.arch, want)
  T.ok(p.ptx:find(".target " .. want, 1, true), "ptx targets " .. want)
  T.eq(check_program(p, 1000), 0, "default-arch program runs correctly")
end)

T.test("cold then warm run in separate processes", function()
  local child = scratch .. "/child.lua"
  local f = assert(io.open(child, "w"))
  f:write(string.format([[
local t0 = os.clock()
local p = cuda.compile(%q, { names = { "scale<3>" } })
local mod = cuda.load(p)
local ms = (os.clock() - t0) * 1000
local n = 1 << 20
local x, y = cuda.host("f32", n), cuda.host("f32", n)
x:random { seed = 1, lo = -1, hi = 1 }
y:random { seed = 2, lo = -1, hi = 1 }
local want = cuda.host("f32", n)
for i = 1, n do want[i] = (2.5 * x[i] + y[i]) * 3 end
local dx, dy = cuda.array("f32", n), cuda.array("f32", n)
dx:copy_from(x); dy:copy_from(y)
mod:kernel("saxpy"):launch({ grid = n // 256, block = 256 }, 2.5, dx, dy, n)
mod:kernel("scale<3>"):launch({ grid = n // 256, block = 256 }, dy, n)
cuda.sync()
local got = cuda.host("f32", n)
got:copy_from(dy)
local r = cuda.compare(got, want, { atol = 1e-5, rtol = 1e-5 })
print(string.format("RESULT hit=%%s mismatches=%%d ms=%%.2f", tostring(p.cache_hit), r.mismatches, ms))
]], SRC))
  f:close()
  local function run()
    local p = assert(io.popen(string.format("GPULAB_CACHE_DIR='%s/cache' '%s' '%s' 2>&1", scratch, gpulab, child)))
    local out = p:read("a")
    p:close()
    local hit, bad, ms = out:match("RESULT hit=(%a+) mismatches=(%d+) ms=([%d.]+)")
    T.ok(hit, "child ran: " .. out)
    return hit == "true", tonumber(bad), tonumber(ms)
  end
  local hit1, bad1, cold = run()
  local hit2, bad2, warm = run()
  T.eq(hit1, false, "cold run compiles")
  T.eq(hit2, true, "warm run hits")
  T.eq(bad1, 0, "cold results")
  T.eq(bad2, 0, "warm results")
  print(string.format("compile+load: cold %.1f ms, warm %.2f ms (CPU time)", cold, warm))
  T.ok(warm < cold, "warm is faster than cold")
end)

T.test("virtual arch: PTX-only program JIT-loads and runs", function()
  local dev = cuda.device(0)
  local p = cuda.compile(SRC, { names = { "scale<3>" }, arch = string.format("compute_%d%d", dev.cc[1], dev.cc[2]) })
  T.eq(p.cubin, nil)
  T.eq(check_program(p, 4097), 0, "PTX program runs correctly")
end)

T.test("cached compile + load is fast", function()
  local opts = { names = { "scale<3>" }, defines = { UNIQUE = os.time() } }
  cuda.compile(SRC, opts) -- fills the cache
  local times = {}
  for i = 1, 15 do
    local t0 = os.clock()
    local p = cuda.compile(SRC, opts)
    local mod = cuda.load(p)
    times[i] = (os.clock() - t0) * 1000
    T.ok(p.cache_hit, "hit")
    mod:free()
  end
  table.sort(times)
  print(string.format("cached compile+load median %.3f ms", times[8]))
  T.ok(times[8] < 20, "cached compile + load under 20 ms (target 2 ms, see tools/bench_compile.lua)")
end)

os.execute("rm -rf '" .. scratch .. "'")
T.done()

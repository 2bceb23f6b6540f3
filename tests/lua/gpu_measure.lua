-- GPU tests for cuda.measure (ctest label `gpu`; skipped without a device). No timing bounds: they
-- check that every regime runs the work as often as it says (a counter kernel), that the clock
-- kernel reads a plausible SM clock, that the spin kernel is released, and that nothing leaks.
-- The timing claims (noise, cold vs hot, rejection) are in tools/measure_check.lua.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local SRC = [[
extern "C" __global__ void bump(unsigned *x) { if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(x, 1u); }
]]
local bump = cuda.load(cuda.compile(SRC, { name = "gpu_measure.cu" })):kernel("bump")
local counter = cuda.array("u32", 1)

local function count()
  local h = cuda.host("u32", 1)
  h:copy_from(counter)
  return h[1]
end

local function run(opts)
  counter:fill(0)
  cuda.sync()
  local r = cuda.measure(function(s) bump:launch({ grid = 1, block = 32, stream = s }, counter) end, opts)
  cuda.sync()
  return r, count()
end

local function check_shape(r, regime)
  T.eq(r.regime, regime)
  T.ok(r.samples >= 10 and #r.times == r.samples, "samples " .. r.samples)
  T.ok(r.ci95[1] <= r.mean and r.mean <= r.ci95[2], "the interval holds the mean")
  T.ok(r.min <= r.median and r.median <= r.max)
  T.ok(r.noise >= 0 and r.noise < math.huge)
  T.ok(({ converged = true, plateau = true, timeout = true, max_samples = true })[r.stop], r.stop)
  T.ok(r.sm_clock_mhz > 100 and r.sm_clock_mhz < 5000, "SM clock " .. tostring(r.sm_clock_mhz))
  if r.clock_ref_mhz then
    T.ok(r.sm_clock_mhz < 1.2 * r.clock_ref_mhz, "clock below 1.2x the reference " .. r.clock_ref_mhz)
  end
  print(string.format("%-6s mean %.5f ms  noise %.3f%%  n %d  rejected %d  stop %s  SM %.0f MHz (ref %s, %s)  batch %d",
    regime, r.mean, 100 * r.noise, r.samples, r.rejected, r.stop, r.sm_clock_mhz, tostring(r.clock_ref_mhz),
    tostring(r.clock_ref), r.batch))
end

T.test("cold: one call per sample, plus the warmup passes", function()
  local s = cuda.stream()
  local r, n = run({ stream = s, min_time = 0.05, timeout = 10 })
  check_shape(r, "cold")
  T.eq(n, r.warmup + r.taken, "calls")
  s:free()
end)

T.test("hot: the batch runs batch times per sample", function()
  local s = cuda.stream()
  local r, n = run({ regime = "hot", stream = s, min_time = 0.05, timeout = 10 })
  check_shape(r, "hot")
  T.ok(r.batch > 1, "a tiny kernel gets a batch: " .. r.batch)
  T.eq(n, r.warmup + r.taken * r.batch)
  r, n = run({ regime = "hot", stream = s, min_time = 0.05, timeout = 10, blocking = true, batch = 50 })
  check_shape(r, "hot")
  T.eq(r.block_timeouts, 0, "the spin kernel was released every time")
  T.eq(n, r.warmup + r.taken * 50)
  s:free()
end)

T.test("graph: captured once, replayed", function()
  local r, n = run({ regime = "graph", batch = 20, min_time = 0.05, timeout = 10 })
  check_shape(r, "graph")
  T.eq(n, r.warmup + r.taken * 20, "every replay ran the kernel once")
end)

T.test("errors leave nothing behind", function()
  local s = cuda.stream()
  local function failing(st)
    bump:launch({ grid = 1, block = 32, stream = st }, counter)
    error("boom")
  end
  local ok, err = pcall(cuda.measure, failing, { regime = "hot", blocking = true, stream = s })
  T.eq(ok, false); T.ok(tostring(err):find("boom", 1, true), tostring(err))
  ok = pcall(cuda.measure, function() error("boom") end, { regime = "graph", stream = s })
  T.eq(ok, false)
  s:sync { timeout = 5 }
  s:free()
  cuda.sync()
  collectgarbage()
  cuda.sync()
  local st = cuda.stats()
  for _, k in ipairs({ "events", "graphs", "streams", "deferred" }) do T.eq(st[k], 0, k) end
end)

T.test("cuda.bench still gives its fields", function()
  local b = cuda.bench(function() bump:launch({ grid = 1, block = 32 }, counter) end, { reps = 5, warmup = 1 })
  T.eq(#b.samples, 5); T.eq(b.reps, 5); T.eq(b.warmup, 1)
  T.ok(b.min <= b.median and b.median <= b.max)
end)

T.done()

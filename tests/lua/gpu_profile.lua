-- On a GPU: cuda.profile on kernels with known counts, and a trace of real launches.
--   a float copy of N elements moves 2 x N x 4 bytes through DRAM (N far above L2), within 5%
--   (L2 keeps up to 60 MB of dirty or prefetched lines);
--   scheduler counters obey their bounds (issued <= eligible <= active <= 16 per scheduler);
--   one row per launch, in order, with grid and block; repeated and failing calls leave no state;
--   the trace holds a device span per launch with a positive duration on its stream's track.
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local ok, why = cuda.profile_available()
if ok and os.getenv("GPULAB_SANITIZER") then -- the sanitizer and CUPTI's profiler both instrument the driver
  ok, why = false, "CUPTI's profiler does not run under compute-sanitizer"
end
if not ok then
  print("skipped: " .. tostring(why))
  os.exit(77)
end
local json = require("gpulab.json")

local dev = cuda.device(0)
local N = 256 * 1024 * 1024 -- 1 GiB each way: what L2 (60 MB) holds back is under 3% of the traffic
local mod = cuda.load(cuda.compile([[
extern "C" __global__ void copy_f32(const float *src, float *dst, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
extern "C" __global__ void spin(float *out, int steps) {
    float a = threadIdx.x;
    for (int i = 0; i < steps; i++) a = a * 0.999f + 1e-3f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}
]], { name = "gpu_profile.cu", arch = dev.arch }))
local copy, spin = mod:kernel("copy_f32"), mod:kernel("spin")
local src, dst = cuda.array("f32", N), cuda.array("f32", N)
src:fill(2)
local out = cuda.array("f32", 64 * 1024)
local M = { "dram__bytes.sum", "smsp__warps_active.avg.per_cycle_active",
  "smsp__warps_eligible.avg.per_cycle_active", "smsp__issue_active.avg.per_cycle_active" }

T.test("DRAM bytes of a copy and scheduler bounds, one row per launch", function()
  local rows = cuda.profile(function()
    copy:launch({ grid = 8 * dev.sm_count, block = 256 }, src, dst, N)
    spin:launch({ grid = 256, block = 256 }, out, 1000)
  end, { metrics = M })
  local ranges = {}
  for i, r in ipairs(rows) do ranges[i] = r.range end
  print(string.format("%d rows (ranges: %s), outer range accepted: %s", #rows, table.concat(ranges, ", "),
    tostring(rows.outer_range)))
  T.eq(#rows, 2)
  T.eq(rows[1].kernel, "copy_f32")
  T.eq(rows[2].kernel, "spin")
  T.eq(table.concat(rows[2].grid, ","), "256,1,1")
  local bytes = rows[1].metrics["dram__bytes.sum"]
  print(string.format("copy of %d floats: dram__bytes.sum = %.0f (expected %d, %+.2f%%), %d pass(es)", N, bytes,
    2 * N * 4, (bytes / (2 * N * 4) - 1) * 100, rows.passes))
  T.ok(math.abs(bytes / (2 * N * 4) - 1) < 0.05, "DRAM bytes within 5% of 2 x N x 4")
  for _, r in ipairs(rows) do
    local a, e, i = r.metrics[M[2]], r.metrics[M[3]], r.metrics[M[4]]
    print(string.format("%s: active %.2f, eligible %.2f, issued %.2f per scheduler per cycle", r.kernel, a, e, i))
    T.ok(a > 0 and a <= 16.01 and e <= a + 0.01 and i <= e + 0.01 and i <= 1.001, "bounds")
  end
end)

T.test("more launches than max_launches: that many rows, the rest counted, with and without the outer range",
  function()
  for _, outer in ipairs({ true, false }) do
    local rows = cuda.profile(function()
      for _ = 1, 5 do spin:launch({ grid = 1, block = 32 }, out, 10) end
    end, { metrics = { M[1] }, max_launches = 2, outer_range = outer })
    print(string.format("outer_range=%s: %d rows, launches %d, dropped %d, truncated %s", tostring(outer), #rows,
      rows.launches, rows.dropped, tostring(rows.truncated)))
    T.eq(#rows, 2)
    T.eq(rows.launches, 5)
    T.eq(rows.truncated, true)
    T.ok(rows.dropped >= 3, "dropped " .. rows.dropped)
  end
end)

T.test("repeated calls, an error inside fn and nesting leave no CUPTI state", function()
  for _ = 1, 5 do
    T.eq(#cuda.profile(function() spin:launch({ grid = 1, block = 32 }, out, 10) end, { metrics = { M[1] } }), 1)
  end
  T.raises(function()
    cuda.profile(function() spin:launch({ grid = 1, block = 32 }, out, 10); error("inside") end, { metrics = { M[1] } })
  end, "inside")
  T.raises(function() cuda.profile(function() end, { metrics = { "dram__bytes.summ" } }) end, "did you mean")
  T.eq(#cuda.profile(function() spin:launch({ grid = 1, block = 32 }, out, 10) end, { metrics = { M[1] } }), 1)
end)

T.test("a trace of real launches has device spans", function()
  local path = os.tmpname()
  local s = cuda.stream()
  cuda.trace(path)
  for _ = 1, 4 do spin:launch({ grid = 64, block = 128, stream = s }, out, 20000) end
  dst:copy_from(src)
  s:sync { timeout = 30 }
  cuda.sync { timeout = 30 }
  local sum = cuda.trace(false)
  local doc = json.decode(T.read(path))
  os.remove(path)
  local kernels = 0
  for _, e in ipairs(doc.traceEvents) do
    if e.pid == 2 and e.cat == "kernel" then
      kernels = kernels + 1
      T.ok(e.dur > 0, "a kernel takes time on the device")
    end
  end
  T.eq(kernels, 4)
  T.eq(sum.device_spans, 5)
end)

T.done()

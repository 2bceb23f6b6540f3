-- What a script sees of the cuda module, one line per step, through the driver stand-in: NVRTC
-- compiles, the kernel's parameters, checked launches and their packed bytes, tensor-map rules,
-- cuda.measure and the harness's measure on scripted times, cuda.profile through the CUPTI
-- stand-in, argument errors and cuda.error objects (an injected out-of-memory, then a sticky
-- fault). test_lua_module.lua runs it under gpulab and under `lua5.4 -e 'require "cuda"'` and
-- requires the two transcripts to be equal.
-- Environment: GPULAB_LIBCUDA (the stand-in), GPULAB_FAKE_LOG, GPULAB_FAKE_ELAPSED_FILE,
-- GPULAB_CUPTI, GPULAB_FAKE_FAIL=cuMemAlloc:2:4,cuMemcpyDtoH:700.
local cuda = require("cuda")

local LOG = assert(os.getenv("GPULAB_FAKE_LOG"), "GPULAB_FAKE_LOG")
local ELAPSED = assert(os.getenv("GPULAB_FAKE_ELAPSED_FILE"), "GPULAB_FAKE_ELAPSED_FILE")

-- Addresses differ from run to run; everything else must not.
local function mask(s) return (tostring(s):gsub("0x%x+", "0x?")) end

local function describe(e)
  if cuda.is_error(e) then
    return string.format("cuda.error code=%s name=%s fn=%s poisoned=%s | %s", e.code, e.name, e.fn,
      tostring(e.poisoned), tostring(e))
  end
  return tostring(e)
end

local function say(label, ...)
  local parts = { label }
  for i = 1, select("#", ...) do parts[#parts + 1] = mask(select(i, ...)) end
  print(table.concat(parts, " | "))
end

local function try(label, fn, ...)
  local ok, r = pcall(fn, ...)
  if ok then say(label, "ok", r) else say(label, "error", describe(r)) end
  return ok and r or nil
end

-- The stand-in's line for the last launch, device pointers (8-byte groups) masked.
local function last_launch()
  local last
  for line in io.lines(LOG) do if line:match("^launch ") then last = line end end
  return (last:gsub("%f[%x]" .. ("%x"):rep(16) .. "%f[^%x]", "<u64>"))
end

-- ---- the module and the stand-in's device --------------------------------------------------
local v = cuda.version()
say("version", v.gpulab, v.lua, v.nvrtc, v.driver)
say("available", cuda.available())
say("count", cuda.count())
local dev = cuda.device(0)
say("device", dev.name, dev.arch, dev.sm_count, dev.warp_size)
say("home has kernels/include", io.open(cuda.home .. "/kernels/include/gpulab/tma.cuh") ~= nil)

-- ---- NVRTC --------------------------------------------------------------------------------
try("compile error", cuda.compile, "__global__ void broken( { }", { name = "broken.cu", cache = false })
local SRC = [[
#include <gpulab/tma.cuh>
template <int N> __global__ void axpy(float *y, const float *x, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * N + y[i];
}
extern "C" __global__ void empty() {}
]]
local prog = cuda.compile(SRC, { name = "axpy.cu", arch = "sm_90a", names = { "axpy<2>" }, cache = false })
say("compile", prog.ptx:find(".entry", 1, true) ~= nil, type(prog.cubin), prog.lowered["axpy<2>"])
local kinds = {}
for i, p in ipairs(prog:params("axpy<2>")) do kinds[i] = p.kind .. "/" .. p.size end
say("params", table.concat(kinds, ","))
try("params of an unknown kernel", prog.params, prog, "nope")

-- ---- modules and checked launches -----------------------------------------------------------
local mod = cuda.load(prog.ptx)
local k = mod:kernel(prog.lowered["axpy<2>"]) -- a PTX image: the stand-in logs packed arguments
say("kernel", k.name, #k.params)
local y, x = cuda.array("f32", 256), cuda.array("f32", 256)
k:launch({ grid = 2, block = 128 }, y, x, 2.5, 256)
say("launch", last_launch())
try("launch: too few arguments", k.launch, k, { grid = 2, block = 128 }, y, x)
try("launch: wrong type", k.launch, k, { grid = 2, block = 128 }, y, x, "a", 256)
try("launch: block too large", k.launch, k, { grid = 1, block = 4096 }, y, x, 1.0, 256)
try("launch: unknown config key", k.launch, k, { grid = 1, block = 1, blocks = 2 }, y, x, 1.0, 256)
local prepared = k:prepare({ grid = 4, block = 64 }, y, x, 0.5, 256)
prepared()
say("prepared", last_launch())
try("kernel: not a kernel", mod.kernel, mod, "missing")
try("array: bad dtype", cuda.array, "half", 4)

-- ---- tensor maps ------------------------------------------------------------------------------
local t2 = cuda.array("f16", { 64, 64 })
local function spec(over)
  local s = { array = t2, dtype = "f16", dims = { 64, 64 }, strides = { 128 }, box = { 64, 64 } }
  for key, val in pairs(over or {}) do s[key] = val end
  return s
end
say("tensormap_check ok", cuda.tensormap_check(spec()))
say("tensormap_check box", cuda.tensormap_check(spec { box = { 257, 1 } }))
say("tensormap_check stride", cuda.tensormap_check(spec { strides = { 100 } }))
say("tensormap_check swizzle", cuda.tensormap_check(spec { swizzle = "128B", box = { 128, 8 } }))
try("tensormap raises", cuda.tensormap, spec { box = { 0, 64 } })
local tm = cuda.tensormap(spec { swizzle = "128B" })
say("tensormap", tm.box_bytes)

-- ---- measure and profile ------------------------------------------------------------------------
local f = assert(io.open(ELAPSED, "w"))
f:write("0.5 0.5 0.5\n")
f:close()
local s = cuda.stream()
local function work(st) k:launch({ grid = 1, block = 32, stream = st or s }, y, x, 1.0, 32) end
local r = cuda.measure(work, { regime = "hot", batch = 1, stream = s, min_time = 0 })
say("measure", r.regime, r.samples, r.mean, r.median, r.noise, r.rejected, r.stop)
local hr = require("gpulab.lab").measure(work, { regime = "hot", batch = 1, stream = s, min_time = 0, label = "work" })
os.remove(ELAPSED)
say("harness.measure", hr.engine, hr.label, hr.samples, hr.mean, hr.stop)
try("measure: bad regime", cuda.measure, function() end, { regime = "warm" })
local rows = cuda.profile(function() k:launch({ grid = 1, block = 32 }, y, x, 1.0, 32) end,
  { metrics = { "dram__bytes.sum" } })
say("profile", #rows, rows[1] and rows[1].kernel, rows[1] and rows[1].metrics["dram__bytes.sum"])

-- ---- errors: an injected out-of-memory (the fourth cuMemAlloc), then a sticky fault (a copy) ------
try("out of memory", cuda.array, "f32", 1024)
say("stats", cuda.stats().arrays, cuda.stats().modules)
local h = cuda.host("f32", 4)
try("sticky", h.copy_from, h, y:view(1, 4))
try("after the fault", cuda.array, "f32", 4)
say("available after the fault", cuda.available())

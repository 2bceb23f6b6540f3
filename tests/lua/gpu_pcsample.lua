-- On a GPU: cuda.pcsample on one kernel with two dependent chains on separate source lines,
-- one warp per scheduler so that nothing hides their latency:
--   line 10, a pointer chase through 256 MiB (far above L2) with an LCG permutation: each load's
--   address is the previous load's value, so the warp waits on the memory scoreboard; the top
--   stall reason CUPTI reports on that line must be the long scoreboard;
--   line 14, a dependent FMA chain: each FMA waits on the previous one's fixed latency; the top
--   reason there must be a wait (fixed-latency dependency) or math one.
-- Every reason name CUPTI reports is printed, with r:annotate's view, the totals and the overhead
-- of sampling (the same launch with and without it). Repeated calls and an error in fn must leave
-- no PC sampling state behind (the next call works).
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local ok, why = cuda.pcsample_available()
if ok and os.getenv("GPULAB_SANITIZER") then -- the sanitizer and CUPTI both instrument the driver
  ok, why = false, "CUPTI's PC sampling does not run under compute-sanitizer"
end
if not ok then
  print("skipped: " .. tostring(why))
  os.exit(77)
end

local SRC = [[
extern "C" __global__ void init_chain(unsigned *next, unsigned mask)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= mask) next[i] = (i * 1664525u + 1013904223u) & mask;
}
extern "C" __global__ void two_chains(const unsigned *next, float *out, int loads, int fmas, float a, float b)
{
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < loads; i++)
        p = __ldcg(&next[p]);
    float x = (float)(p & 1023u) * 1e-3f;
#pragma unroll 16
    for (int i = 0; i < fmas; i++)
        x = fmaf(x, a, b);
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
]]
local LOAD_LINE, FMA_LINE = 10, 14
local dev = cuda.device(0)
local prog = cuda.compile(SRC, {name = "gpu_pcsample.cu", arch = dev.arch, lineinfo = true})
local mod = cuda.load(prog)
local init, chains = mod:kernel("init_chain"), mod:kernel("two_chains")
local N = 64 * 1024 * 1024 -- 256 MiB of u32: the chase misses L2 (60 MB)
local next_ = cuda.array("u32", N)
init:launch({grid = N // 256, block = 256}, next_, N - 1)
local WARPS = dev.sm_count * 4 -- one warp per scheduler
local out = cuda.array("f32", WARPS * 32)
local LOADS, FMAS = 4000, 2000000
local function run() chains:launch({grid = WARPS, block = 32}, next_, out, LOADS, FMAS, 0.999, 1e-3) end
run() -- loaded and warm before sampling
cuda.sync()

local function top(stalls)
  local best, name = -1, nil
  for k, n in pairs(stalls) do if n > best or (n == best and k < name) then best, name = n, k end end
  return name, best
end
local function line_of(row, n)
  for _, l in ipairs(row.lines) do if l.line == n and l.file:find("gpu_pcsample.cu", 1, true) then return l end end
end
local function show_line(l)
  local names = {}
  for k in pairs(l.stalls) do names[#names + 1] = k end
  table.sort(names, function(x, y) return l.stalls[x] > l.stalls[y] end)
  for _, k in ipairs(names) do print(string.format("    %-60s %d", k, l.stalls[k])) end
end

T.test("the load line stalls on the long scoreboard, the FMA line on a fixed-latency wait", function()
  local r = cuda.pcsample(run, {programs = prog, baseline = true})
  print("stall reasons CUPTI reports (" .. #r.reasons .. "):")
  for i, n in ipairs(r.reasons) do print(string.format("  %2d %s", i, n)) end
  print(tostring(r))
  print(string.format("total_samples=%d dropped=%d non_user=%d records=%d hardware_buffer_full=%s",
    r.total_samples, r.dropped_samples, r.non_user_samples, r.records, tostring(r.hardware_buffer_full)))
  print(string.format("elapsed %.6f s sampled, %.6f s plain: overhead x%.3f", r.elapsed, r.baseline, r.overhead))
  T.ok(r.overhead > 0, "the overhead is measured")
  T.eq(#r, 1, "one kernel sampled")
  local row = r[1]
  T.eq(row.kernel, "two_chains")
  T.eq(row.launches, 1)
  T.ok(row.samples >= 1000, "enough samples to judge: " .. row.samples)
  print(r:annotate(chains))
  if row.lines_missing then
    print("skipped: no source lines (" .. row.lines_missing .. ")")
    os.exit(77)
  end
  local load, fma = line_of(row, LOAD_LINE), line_of(row, FMA_LINE)
  T.ok(load and fma, "both chains' lines were sampled")
  print("line " .. LOAD_LINE .. " (pointer chase): " .. load.samples .. " samples")
  show_line(load)
  print("line " .. FMA_LINE .. " (FMA chain): " .. fma.samples .. " samples")
  show_line(fma)
  T.ok((load.samples + fma.samples) / row.samples > 0.7,
       "the two chains hold most samples: " .. (load.samples + fma.samples) .. " of " .. row.samples)
  local lt, ft = top(load.stalls), top(fma.stalls)
  T.ok(lt:find("long_scoreboard", 1, true), "top stall on the load line: " .. lt)
  T.ok(ft:find("wait", 1, true) or ft:find("math", 1, true), "top stall on the FMA line: " .. ft)
  -- each PC of the row carries its instruction: the chase's line holds a global load
  local has_ldg = false
  for _, pc in ipairs(row.pcs) do
    if pc.line == LOAD_LINE and pc.opcode and pc.opcode:find("^LDG") then has_ldg = true end
  end
  T.ok(has_ldg, "an LDG on the load line")
end)

T.test("repeated calls and an error in fn leave no PC sampling state behind", function()
  for _ = 1, 3 do
    local r = cuda.pcsample(run, {programs = prog, period = 10})
    T.ok(r[1] and r[1].samples > 0, "samples again")
  end
  T.raises(function() cuda.pcsample(function() run(); error("boom in fn") end) end, "boom in fn")
  local r = cuda.pcsample(run, {mode = "continuous"})
  T.ok(r[1] and r[1].kernel == "two_chains" and r[1].samples > 0, "continuous mode after an error")
  -- and cuda.profile still works after PC sampling
  if cuda.profile_available() then
    local rows = cuda.profile(run, {metrics = {"smsp__warps_active.avg.per_cycle_active"}})
    T.eq(#rows, 1)
  end
end)

T.done()

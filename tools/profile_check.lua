-- profile_check.lua — cuda.profile against Nsight Compute on the same kernels, and the cost of
-- cuda.trace on a launch. Run on a GPU machine:
--     build/gpulab tools/profile_check.lua            (tools/profile_check.sh does the same)
-- It launches three kernels (a float copy of N elements, whose DRAM traffic is known: 2 x N x 4
-- bytes; the FMA and load chains of kernels/warp_states.cu at full occupancy), reads their counters
-- in-process with cuda.profile, re-runs the same launches in a child under
--     ncu --clock-control none --print-units base --csv --metrics ...
-- and prints both side by side with the relative difference. If cuda.profile fails it prints
-- CUPTI's error (call, status, message) and exits 1.
local MODE = arg[1] or "compare"

local N = 256 * 1024 * 1024 -- 1 GiB each way: what the 60 MB L2 holds back is a few % at most
local BLOCK = 128
local METRICS = {
  "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
  "smsp__warps_active.avg.per_cycle_active", "smsp__warps_eligible.avg.per_cycle_active",
  "smsp__issue_active.avg.per_cycle_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
}

local COPY = [[
extern "C" __global__ void copy_f32(const float *__restrict__ src, float *__restrict__ dst, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
]]

local ok, why = cuda.available()
if not ok then
  print("profile_check: no GPU: " .. tostring(why))
  os.exit(77)
end
local dev = cuda.device(0)
local copy = cuda.load(cuda.compile(COPY, { name = "copy.cu", arch = dev.arch })):kernel("copy_f32")
local names = { "fma_chain<1>", "load_chain<1>" }
local ws = cuda.load(cuda.compile_file(cuda.home .. "/kernels/warp_states.cu",
  { arch = "sm_90a", std = "c++17", names = names }))
local fma, loadk = ws:kernel(names[1]), ws:kernel(names[2])

local src, dst = cuda.array("f32", N), cuda.array("f32", N)
src:fill(1.5)
local CHAIN = 1 << 20
local perm = cuda.host("u32", CHAIN)
for i = 1, CHAIN do perm[i] = i % CHAIN end -- a single cycle
local chain = cuda.array("u32", CHAIN)
chain:copy_from(perm)
local grid_full = 16 * dev.sm_count -- 16 blocks of 128 threads: 64 warps per SM
local out_f = cuda.array("f32", grid_full * BLOCK)
local out_u = cuda.array("u32", grid_full * BLOCK)

-- The launches both tools see, in this order.
local LAUNCHES = {
  { label = "copy_f32 (1 GiB)",
    run = function() copy:launch({ grid = 32 * dev.sm_count, block = 256 }, src, dst, N) end },
  { label = "fma_chain<1> 64 warps/SM",
    run = function() fma:launch({ grid = grid_full, block = BLOCK }, out_f, 4096) end },
  { label = "load_chain<1> 64 warps/SM",
    run = function() loadk:launch({ grid = grid_full, block = BLOCK }, chain, CHAIN, out_u, 256) end },
}

if MODE == "--run-only" then -- the child ncu profiles
  for _, l in ipairs(LAUNCHES) do l.run() end
  cuda.sync { timeout = 60 }
  os.exit(0)
end

for _, l in ipairs(LAUNCHES) do l.run() end -- warm-up: module load, first-touch
cuda.sync { timeout = 60 }

-- host cost of a launch of an empty kernel, before CUPTI was ever used in this process
local empty = cuda.load(cuda.compile('extern "C" __global__ void empty() {}', { name = "e.cu", arch = dev.arch }))
  :kernel("empty")
local function per_launch_us(reps)
  cuda.sync { timeout = 30 }
  local t = cuda.now()
  for _ = 1, reps do empty:launch({ grid = 1, block = 32 }) end
  local dt = cuda.now() - t
  cuda.sync { timeout = 30 }
  return dt / reps * 1e6
end
local function median(t) table.sort(t) return t[(#t + 1) // 2] end
local before_cupti = {}
for round = 1, 7 do before_cupti[round] = per_launch_us(2000) end

-- ---- in-process -------------------------------------------------------------------------------
local avail, where = cuda.profile_available()
print("CUPTI: " .. tostring(where))
if not avail then os.exit(1) end
local function profile_all(outer)
  return pcall(cuda.profile, function()
    for _, l in ipairs(LAUNCHES) do l.run() end
  end, { metrics = METRICS, outer_range = outer })
end
local fine, rows = profile_all(true)
if not fine then
  print("cuda.profile FAILED: " .. tostring(rows))
  os.exit(1)
end
if #rows ~= #LAUNCHES then
  -- which range layout this CUPTI wants: say what came back, then try without the outer range
  print(string.format("cuda.profile with the outer range: %d rows for %d launches (outer_range accepted: %s)",
    #rows, #LAUNCHES, tostring(rows.outer_range)))
  for i, r in ipairs(rows) do print(string.format("  range %d: %s", i, r.range)) end
  local fine2, rows2 = profile_all(false)
  print(string.format("cuda.profile without the outer range: %s", fine2 and (#rows2 .. " rows") or tostring(rows2)))
  if fine2 and #rows2 == #LAUNCHES then rows = rows2 end
end
print(string.format("cuda.profile: %d rows for %d launches, %d pass(es), chip %s, dropped %d", #rows,
  rows.launches, rows.passes, rows.chip, rows.dropped))
for i, r in ipairs(rows) do
  print(string.format("  row %d: kernel=%s range=%s grid=%s block=%s", i, r.kernel, r.range,
    r.grid and table.concat(r.grid, ",") or "?", r.block and table.concat(r.block, ",") or "?"))
end
-- repeated calls leave no state: a second profile in the same process must work too
local again = cuda.profile(function() LAUNCHES[1].run() end, { metrics = { "dram__bytes.sum" } })
print(string.format("second cuda.profile: %d row, dram__bytes.sum = %.0f", #again,
  again[1] and again[1].metrics["dram__bytes.sum"] or -1))

-- ---- ncu on the same launches -------------------------------------------------------------------
local function exe()
  local i = 0
  while arg[i - 1] do i = i - 1 end
  return arg[i]
end
local split_csv = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/csv.lua").fields
local SCALE = { byte = 1, Kbyte = 1e3, Mbyte = 1e6, Gbyte = 1e9, nsecond = 1, usecond = 1e3, msecond = 1e6,
  second = 1e9, ns = 1, us = 1e3, ms = 1e6 }

local ncu = os.getenv("NCU") or "ncu"
if not os.execute("command -v " .. ncu .. " >/dev/null 2>&1") then ncu = "/usr/local/cuda/bin/ncu" end
local function run_ncu(units)
  local cmd = string.format("timeout 600 %s --clock-control none %s --csv --metrics %s '%s' '%s' --run-only 2>&1",
    ncu, units, table.concat(METRICS, ","), exe(), arg[0])
  print("running: " .. cmd)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  return out
end
local text = run_ncu("--print-units base")
if not text:find('"ID"', 1, true) then
  print("ncu with --print-units base gave no table; its output ends with:\n" .. text:sub(-800))
  text = run_ncu("") -- units are then converted from the unit column
end
local header, by_id, order = nil, {}, {}
for line in text:gmatch("[^\n]+") do
  if line:sub(1, 1) == '"' then
    local f = split_csv(line)
    if not header and f[1] == "ID" then
      header = {}
      for i, h in ipairs(f) do header[h] = i end
    elseif header then
      local id = f[header["ID"]]
      if not by_id[id] then by_id[id] = {} ; order[#order + 1] = id end
      local v = tonumber((string.gsub(f[header["Metric Value"]] or "", ",", "")))
      local unit = f[header["Metric Unit"]] or ""
      if v and SCALE[unit] and unit ~= "byte" and unit ~= "nsecond" then v = v * SCALE[unit] end
      by_id[id][f[header["Metric Name"]]] = v
    end
  end
end
if #order == 0 then
  print("ncu gave no rows; its output ends with:\n" .. text:sub(-1500))
end

-- ---- side by side --------------------------------------------------------------------------------
local worst = {}
print(string.format("\n%-28s %-52s %16s %16s %9s", "launch", "metric", "cuda.profile", "ncu", "rel diff"))
for i, l in ipairs(LAUNCHES) do
  local mine = rows[i] and rows[i].metrics or {}
  local theirs = order[i] and by_id[order[i]] or {}
  for _, m in ipairs(METRICS) do
    local a, b = mine[m], theirs[m]
    local rel = (a and b and b ~= 0) and (a - b) / math.abs(b) or nil
    if rel and (not worst[m] or math.abs(rel) > math.abs(worst[m])) then worst[m] = rel end
    print(string.format("%-28s %-52s %16s %16s %9s", l.label, m, a and string.format("%.4g", a) or "-",
      b and string.format("%.4g", b) or "-", rel and string.format("%+.2f%%", rel * 100) or "-"))
  end
end
local expect = 2 * N * 4
local got = rows[1] and rows[1].metrics["dram__bytes.sum"]
print(string.format("\ncopy of %d floats: DRAM bytes expected 2 x N x 4 = %d; cuda.profile %s (%+.2f%%)",
  N, expect, got and string.format("%.0f", got) or "-", got and (got - expect) / expect * 100 or 0))
print("largest |relative difference| per metric over the three kernels:")
for _, m in ipairs(METRICS) do
  print(string.format("  %-52s %s", m, worst[m] and string.format("%+.2f%%", worst[m] * 100) or "-"))
end

-- ---- the cost of tracing on a launch ---------------------------------------------------------------
local plain, traced = {}, {}
local tracefile = os.tmpname()
for round = 1, 7 do
  plain[round] = per_launch_us(2000)
  cuda.trace(tracefile)
  traced[round] = per_launch_us(2000)
  cuda.trace(false)
end
os.remove(tracefile)
print(string.format("\nhost cost of k:launch (empty kernel, median of 7 x 2000): %.2f us untraced, "
  .. "%.2f us traced (%.2fx)", median(plain), median(traced), median(traced) / median(plain)))
print(string.format("the same before any cuda.profile in this process: %.2f us (after: %.2f us; equal within noise "
  .. "means the profiler left nothing attached)", median(before_cupti), median(plain)))

-- l2_hit_probe.lua — what the L2 counters say about a hot set between kernels, under cuda.profile
-- (CUPTI's range profiler, kernel replay) and, with `plain`, with no profiler in the process (for
-- ncu --cache-control none|all to profile). memory_system's persist_hits claim needs to know
-- whether the profiler keeps L2 between kernels; this sequence shows it:
--   1 read the hot set; 2 read it again (nothing between: resident if the profiler keeps L2);
--   3 read it with reps=4 inside one launch (the hit rate of in-kernel re-reads, whatever the
--   profiler does between kernels); 4 a streaming scan; 5 the hot set again.
-- With `window`: a persisting access-policy window over the hot set (launch key l2_window, and on
-- the stream), a 512 MiB and a 120 MiB streaming scan between, the hot read timed with events with
-- and without the window, and the same sequence's DRAM read bytes under cuda.profile.
-- Usage: gpulab tools/l2_hit_probe.lua [plain | window]
local plain, window_mode = arg[1] == "plain", arg[1] == "window"
local dev = cuda.device(0)
local prog = cuda.compile_file(cuda.home .. "/kernels/memory_system.cu", { arch = dev.arch, std = "c++17" })
local mod = cuda.load(prog)
local fill, read16 = mod:kernel("fill_pattern"), mod:kernel("read16")
local BLOCK = 512
local per_sm = read16:occupancy(BLOCK, 0)
local HOT16, SCAN16 = 16 * 2 ^ 20 // 16, 512 * 2 ^ 20 // 16
local hot, scan = cuda.array("u32", 4 * HOT16), cuda.array("u32", 4 * SCAN16)
local counter = cuda.array("u64", 1)
fill:launch({ grid = dev.sm_count * 8, block = BLOCK }, hot, HOT16, 2)
fill:launch({ grid = dev.sm_count * 8, block = BLOCK }, scan, SCAN16, 3)
cuda.sync()
local cfg = { grid = dev.sm_count * per_sm, block = BLOCK }
local steps = {
  { "hot set, first read", function() read16:launch(cfg, hot, HOT16, 1, counter) end, HOT16 },
  { "hot set, re-read right after", function() read16:launch(cfg, hot, HOT16, 1, counter) end, HOT16 },
  { "hot set, 4 reads in one launch", function() read16:launch(cfg, hot, HOT16, 4, counter) end, 4 * HOT16 },
  { "streaming scan, 512 MiB", function() read16:launch(cfg, scan, SCAN16, 1, counter) end, SCAN16 },
  { "hot set after the scan", function() read16:launch(cfg, hot, HOT16, 1, counter) end, HOT16 },
}
local function sequence() for _, s in ipairs(steps) do s[2]() end end
if window_mode then
  local granted = cuda.l2_persisting(HOT16 * 16)
  print(string.format("persisting set-aside granted: %.1f MiB", granted / 2 ^ 20))
  local win = { array = hot, hit_ratio = math.min(1, granted / (HOT16 * 16)), hit = "persisting", miss = "streaming" }
  local wcfg = { grid = cfg.grid, block = cfg.block, l2_window = win }
  local e0, e1 = cuda.event { timing = true }, cuda.event { timing = true }
  local function timed(fn)
    e0:record(); fn(); e1:record(); e1:sync { timeout = 30 }
    return e1:elapsed(e0)
  end
  local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/turns.lua").median
  local scans = { { "512 MiB", SCAN16 }, { "120 MiB", 120 * 2 ^ 20 // 16 } }
  for _, sc in ipairs(scans) do
    local with, without = {}, {}
    for _ = 1, 7 do
      read16:launch(wcfg, hot, HOT16, 1, counter)          -- marks the hot lines persisting
      read16:launch(cfg, scan, sc[2], 1, counter)
      with[#with + 1] = timed(function() read16:launch(wcfg, hot, HOT16, 1, counter) end)
      cuda.l2_reset()
      read16:launch(cfg, hot, HOT16, 1, counter)
      read16:launch(cfg, scan, sc[2], 1, counter)
      without[#without + 1] = timed(function() read16:launch(cfg, hot, HOT16, 1, counter) end)
      cuda.l2_reset()
    end
    print(string.format("hot read after a %s scan, median of 7 (events): %.4f ms with the window, %.4f ms without",
      sc[1], median(with), median(without)))
  end
  local function profiled(tag, fn)
    local ok, rows = pcall(cuda.profile, fn, { metrics = { "dram__bytes_read.sum" } })
    if not ok then print(tag .. ": " .. tostring(rows)) return end
    local parts = {}
    for i, r in ipairs(rows) do parts[i] = string.format("%.1f", (r.metrics["dram__bytes_read.sum"] or -1) / 2 ^ 20) end
    print(tag .. ": DRAM MiB read per launch: " .. table.concat(parts, ", "))
  end
  cuda.l2_reset()
  profiled("cuda.profile, launch key l2_window (hot, scan 512, hot)", function()
    read16:launch(wcfg, hot, HOT16, 1, counter)
    read16:launch(cfg, scan, SCAN16, 1, counter)
    read16:launch(wcfg, hot, HOT16, 1, counter)
  end)
  cuda.l2_reset()
  local st = cuda.stream()
  st:set_l2_window(win)
  local scfg = { grid = cfg.grid, block = cfg.block, stream = st }
  profiled("cuda.profile, window on the stream (hot, scan 512, hot)", function()
    read16:launch(scfg, hot, HOT16, 1, counter)
    read16:launch(scfg, scan, SCAN16, 1, counter)
    read16:launch(scfg, hot, HOT16, 1, counter)
  end)
  st:set_l2_window(nil)
  cuda.l2_reset()
  cuda.l2_persisting(0)
  cuda.sync()
  return
end
if plain then
  sequence()
  cuda.sync()
  print("l2_hit_probe: sequence ran (" .. #steps .. " launches)")
  return
end
local sets = {
  { "dram__bytes_read.sum" },
  { "lts__t_sector_hit_rate.pct" },
  { "lts__t_sectors_srcunit_tex_lookup_hit.sum", "lts__t_sectors_srcunit_tex_lookup_miss.sum" },
  { "lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum", "lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum" },
}
for _, m in ipairs(sets) do
  local ok, rows = pcall(cuda.profile, sequence, { metrics = m })
  print("metrics: " .. table.concat(m, ", "))
  if not ok then
    print("  failed: " .. tostring(rows))
  else
    for i, row in ipairs(rows) do
      local vals = {}
      for _, name in ipairs(m) do vals[#vals + 1] = string.format("%s=%.6g", name, row.metrics[name] or -1) end
      local extra = ""
      if m[1] == "dram__bytes_read.sum" and row.metrics[m[1]] then
        extra = string.format("  (%.3f of the bytes read)", row.metrics[m[1]] / (steps[i][3] * 16))
      elseif m[2] and row.metrics[m[1]] and row.metrics[m[2]] then
        local h, x = row.metrics[m[1]], row.metrics[m[2]]
        extra = string.format("  (hits %.1f%%)", 100 * h / math.max(h + x, 1))
      end
      print(string.format("  %d %-32s %s%s", i, steps[i][1], table.concat(vals, " "), extra))
    end
  end
end

-- l2_hit_probe.lua — what the L2 counters say about a hot set between kernels, under cuda.profile
-- (CUPTI's range profiler, kernel replay) and, with `plain`, with no profiler in the process (for
-- ncu --cache-control none|all to profile). memory_system's persist_hits claim needs to know
-- whether the profiler keeps L2 between kernels; this sequence shows it:
--   1 read the hot set; 2 read it again (nothing between: resident if the profiler keeps L2);
--   3 read it with reps=4 inside one launch (the hit rate of in-kernel re-reads, whatever the
--   profiler does between kernels); 4 a streaming scan; 5 the hot set again.
-- Usage: gpulab tools/l2_hit_probe.lua [plain]
local plain = arg[1] == "plain"
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

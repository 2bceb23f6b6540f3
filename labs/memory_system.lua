-- memory_system.lua — the memory system against the SMs: how many SMs it takes to reach HBM
-- bandwidth (and L2 bandwidth), whether a hot working set keeps its L2 lines under streaming
-- traffic with a persisting window, and the latency of each level.
--
-- The seed has no memory-system section: every claim is the lab's own, stated with the values it
-- is judged against. Bandwidth is measured on SM partitions (cuda.partition, green contexts) of
-- 8, 16, 32, 64 SMs and the whole device; without partitions those claims stay unclear (a grid
-- of n blocks is not n SMs: the hardware spreads blocks over every SM it has). Every kernel's
-- result is checked on the device against the formula that produced the data.
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "memory_system",
  title = "The memory system: SMs against HBM and L2 bandwidth, a persisting L2 window, latency per level",
  claims = "the lab's own questions: seed §1-§5 have no memory-system section",
  params = {
    { name = "hbm_mib", default = 512, min = 128, max = 8192, multiple_of = 16,
      help = "MiB copied per launch (read, and the same written): well above the L2" },
    { name = "l2_mib", default = 16, min = 1, max = 32, help = "the L2-resident working set (MiB)" },
    { name = "l2_reps", default = 64, quick = 32, min = 1, max = 10000, help = "re-reads of the L2 set per launch" },
    { name = "min_time", default = 0.5, quick = 0.15, min = 0.01, max = 60,
      help = "cuda.measure's min_time per configuration (s)" },
    { name = "max_samples", default = 200, quick = 60, min = 10, max = 100000,
      help = "cuda.measure's max_samples per configuration" },
    { name = "hops", default = 20000, quick = 4096, min = 256, max = 200000,
      help = "timed hops of each pointer chase" },
    { name = "chase_runs", default = 7, quick = 5, min = 3, max = 50, help = "pointer chases per level" },
  },
}
local P = lab.params
local KNEE_SMS, KNEE_FRACTION, L2_GAIN = 64, 0.9, 1.2

lab:claim { id = "hbm_knee", own = true, text = string.format(
  "HBM copy bandwidth saturates well before all SMs are used: a %d-SM partition reaches at least %d%% of the " ..
  "whole device's copy bandwidth (bytes well above the L2)", KNEE_SMS, KNEE_FRACTION * 100) }
lab:claim { id = "l2_scales", own = true, text = string.format(
  "L2 bandwidth keeps growing past the HBM knee: the whole device re-reads an L2-resident set at least %.1fx " ..
  "faster than a %d-SM partition", L2_GAIN, KNEE_SMS) }
lab:claim { id = "littles_law", own = true, text =
  "Little's law binds the few-SM copies: the bytes in flight per SM that the 8-SM read bandwidth (half the " ..
  "copy's, which reads as many bytes as it writes) and the measured HBM latency imply (read bandwidth x latency / " ..
  "SMs) do not exceed what the copy kernel's resident threads can have in flight (4 loads of 16 B each)" }
lab:claim { id = "persist_time", own = true, text =
  "a hot working set re-read after streaming traffic is faster with a persisting L2 access-policy window than " ..
  "without (cuda.measure, cold regime without the persisting-line reset)" }
lab:claim { id = "persist_hits", own = true, text =
  "after a streaming scan of the large array, the share of the hot set's bytes that L2 serves (1 - CUPTI " ..
  "dram__bytes_read.sum / the bytes read) stays at or above 80% with a persisting window and falls to 50% or " ..
  "below without" }
lab:claim { id = "latency_order", own = true, text =
  "dependent-load latency orders L1 < L2 < HBM, each level at least 1.5x the one before (pointer chase, " ..
  "one thread, clock64)" }
-- The published Hopper figures: Luo et al., "Dissecting the NVIDIA Hopper Architecture through
-- Microbenchmarking and Multiple Level Analysis" (arXiv 2501.12084), H800 PCIe at 1755 MHz, one
-- thread chasing dependent pointers; read from the data the authors released with it
-- (github.com/HPMLL/NVIDIA-Hopper-Benchmark, NewFeatures/TMA/Latency/tma_lat_random/h800_pcie.txt,
-- commit ded6f57; columns: footprint kB, ns, cycles): the rows nearest the footprints chased here,
-- 10 kB (L1), 1,002 kB (L2) and 462,173 kB (HBM; that row's ns column is not per hop: ns = cycles / 1.755).
-- L1 is compared in SM cycles (the SM's own pipeline); L2 and HBM in ns, since they lie outside
-- the SM and the H200 runs its SMs at up to 1980 MHz, so the same latency costs it more cycles.
local PUBLISHED = {
  source = "Luo et al., arXiv 2501.12084 (H800 PCIe, 1755 MHz; HPMLL/NVIDIA-Hopper-Benchmark h800_pcie.txt)",
  { level = "L1", unit = "cycles", value = 32.0 },
  { level = "L2", unit = "ns", value = 150.6, cycles = 264.3 },
  { level = "HBM", unit = "ns", value = 1e3 * 652.2 / 1755, cycles = 652.2 },
}
local PUBLISHED_MARGIN = 0.15
lab:claim { id = "latency_published", source = PUBLISHED.source, text = string.format(
  "dependent-load latency per level is within %d%% of the figures published for Hopper (%s): L1 %.1f cycles, " ..
  "L2 %.1f ns (%.1f cycles), HBM %.0f ns (%.1f cycles); L1 compared in cycles, L2 and HBM in ns (a different " ..
  "part: H800 PCIe with HBM2e, against the H200's HBM3e and higher SM clock)", PUBLISHED_MARGIN * 100,
  PUBLISHED.source, PUBLISHED[1].value, PUBLISHED[2].value, PUBLISHED[2].cycles, PUBLISHED[3].value,
  PUBLISHED[3].cycles) }

-- ---------------------------------------------------------------------------------------------
lab:section("Setup")
local prog = lab:compile("kernels/memory_system.cu", { arch = "sm_90a", std = "c++17",
  what = "fill_pattern, check_pattern, pattern_sum, copy16, read16, make_chain, chase" })
lab:require_gpu()

local dev = cuda.device(0)
local mod = cuda.load(prog)
local K = {}
for _, name in ipairs { "fill_pattern", "check_pattern", "pattern_sum", "copy16", "read16", "make_chain", "chase" } do
  K[name] = mod:kernel(name)
end
local BLOCK = 512
local copy_per_sm = K.copy16:occupancy(BLOCK, 0)
local read_per_sm = K.read16:occupancy(BLOCK, 0)
local WAIT = { timeout = 60 }
lab:note(string.format("%s: %d SMs, L2 %.0f MiB; copy16 and read16 in blocks of %d threads, %d and %d blocks " ..
  "per SM", dev.name, dev.sm_count, dev.l2_bytes / 2 ^ 20, BLOCK, copy_per_sm, read_per_sm))

local function bytes_mib(b) return string.format("%.0f MiB", b / 2 ^ 20) end
local function grid_for(n) return math.max(1, math.min(dev.sm_count * 8, (n + BLOCK - 1) // BLOCK)) end

local counter = cuda.array("u64", 1)
local counter_h = cuda.host("u64", 1)
-- Runs `launch(counter)` once on the default stream after zeroing the counter; returns its value.
local function count_with(launch)
  counter:fill(0)
  launch(counter)
  cuda.sync(WAIT)
  counter_h:copy_from(counter)
  return counter_h[1]
end

local N16 = P.hbm_mib * 2 ^ 20 // 16 -- 16-byte elements of each HBM array
local src, dst = cuda.array("u32", 4 * N16), cuda.array("u32", 4 * N16)
local L2_N16 = P.l2_mib * 2 ^ 20 // 16
local hot = cuda.array("u32", 4 * L2_N16)
K.fill_pattern:launch({ grid = grid_for(N16), block = BLOCK }, src, N16, 1)
K.fill_pattern:launch({ grid = grid_for(L2_N16), block = BLOCK }, hot, L2_N16, 2)
cuda.sync(WAIT)
local hot_sum = count_with(function(c)
  K.pattern_sum:launch({ grid = dev.sm_count * 4, block = BLOCK }, L2_N16, 2, c)
end)
if hot_sum == 0 then lab:fail("pattern_sum of the hot set returned 0: the kernels did not run") end
-- Each result check that fails leaves its claims undecided as well as failing the lab.
local valid = { bandwidth = hot_sum ~= 0, hot = hot_sum ~= 0, chase = true }

local function measure(fn, stream, extra)
  local o = { stream = stream, regime = "hot", min_time = P.min_time, max_samples = P.max_samples, timeout = 60 }
  for k, v in pairs(extra or {}) do o[k] = v end
  return cuda.measure(fn, o)
end

-- GB/s and its interval from a time result (ms) for `bytes` per launch.
local function rate(r, bytes)
  return bytes / (r.mean * 1e6), { bytes / (r.ci95[2] * 1e6), bytes / (math.max(r.ci95[1], 1e-9) * 1e6) }
end

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: bandwidth against SMs")
local partitions_ok, partitions_why = type(cuda.partition) == "function", "cuda.partition is missing"
if partitions_ok then
  local ok, err = pcall(function() cuda.partition { sms = dev.sm_count }:free() end)
  partitions_ok, partitions_why = ok, not ok and tostring(err) or nil
end
if not partitions_ok then
  lab:note("no SM partitions on this driver (" .. tostring(partitions_why) .. "): the bandwidth claims stay unclear")
end

local SM_COUNTS = {}
for _, n in ipairs { 8, 16, 32, 64 } do if n < dev.sm_count then SM_COUNTS[#SM_COUNTS + 1] = n end end
SM_COUNTS[#SM_COUNTS + 1] = dev.sm_count
local bw = {} -- by SM count: { sms, hbm = result, l2 = result, granted }
local hbm_bytes, l2_bytes = 2 * N16 * 16, P.l2_reps * L2_N16 * 16

local function measure_partition(n)
  local part = cuda.partition { sms = n }
  local s = part:stream()
  local row = { sms = part.sm_count, asked = n }
  -- HBM: a copy of hbm_mib MiB (read and write), one resident wave of blocks on the partition's SMs
  dst:fill(0)
  cuda.sync(WAIT)
  local ccfg = { grid = part.sm_count * copy_per_sm, block = BLOCK, stream = s }
  row.hbm = measure(function() K.copy16:launch(ccfg, src, dst, N16) end, s)
  s:sync(WAIT)
  local bad = count_with(function(c)
    K.check_pattern:launch({ grid = grid_for(N16), block = BLOCK }, dst, N16, 1, c)
  end)
  if bad ~= 0 then
    valid.bandwidth = false
    lab:fail(string.format("copy16 on %d SMs: %d of %d elements wrong", n, bad, N16))
  end
  -- L2: the hot set re-read l2_reps times per launch
  local rcfg = { grid = part.sm_count * read_per_sm, block = BLOCK, stream = s }
  row.l2 = measure(function() K.read16:launch(rcfg, hot, L2_N16, P.l2_reps, counter) end, s)
  s:sync(WAIT)
  local got = count_with(function(c)
    rcfg.stream = nil
    K.read16:launch(rcfg, hot, L2_N16, P.l2_reps, c)
    rcfg.stream = s
  end)
  if got ~= P.l2_reps * hot_sum then
    valid.bandwidth = false
    lab:fail(string.format("read16 on %d SMs summed %d, expected %d", n, got, P.l2_reps * hot_sum))
  end
  s:free()
  part:free()
  return row
end

if partitions_ok then
  local rows = {}
  for _, n in ipairs(SM_COUNTS) do
    local row = measure_partition(n)
    bw[#bw + 1] = row
    local h, hci = rate(row.hbm, hbm_bytes)
    local l, lci = rate(row.l2, l2_bytes)
    row.hbm_gbps, row.hbm_ci, row.l2_gbps, row.l2_ci = h, hci, l, lci
    rows[#rows + 1] = { row.sms, string.format("%.0f [%.0f, %.0f]", h, hci[1], hci[2]),
      string.format("%.1f", h / row.sms), string.format("%.0f [%.0f, %.0f]", l, lci[1], lci[2]),
      string.format("%.1f", l / row.sms), row.hbm.samples, row.l2.samples }
    lab:record("bandwidth_" .. row.sms, { sms = row.sms, hbm_gbps = h, hbm_ci = hci, l2_gbps = l, l2_ci = lci })
  end
  lab:table({ "SMs", "HBM copy GB/s [95% CI]", "GB/s per SM", "L2 read GB/s [95% CI]", "GB/s per SM",
    "HBM samples", "L2 samples" }, rows)
  lab:note(string.format("HBM: copy16 moves %s per launch (%s read + %s written); L2: read16 reads a %s set %d " ..
    "times per launch (%s)", bytes_mib(hbm_bytes), bytes_mib(hbm_bytes / 2), bytes_mib(hbm_bytes / 2),
    bytes_mib(L2_N16 * 16), P.l2_reps, bytes_mib(l2_bytes)))
end

local function row_for(sms)
  for _, r in ipairs(bw) do if r.sms == sms then return r end end
end
local knee, whole = row_for(KNEE_SMS), row_for(dev.sm_count)
if knee and whole and not valid.bandwidth then
  lab:verdict("hbm_knee", "a copy or read result was wrong (see the failures): nothing is judged", nil)
  lab:verdict("l2_scales", "a copy or read result was wrong (see the failures): nothing is judged", nil)
elseif knee and whole then
  -- time(64 SMs) / time(all): below 1/0.9 means the 64-SM partition reaches over 90% of the bandwidth
  local d, ratio, ci, detail = lab:compare(knee.hbm, whole.hbm, { margin = 0.01, against = 1 / KNEE_FRACTION })
  local holds = ({ faster = true, slower = false })[d]
  lab:verdict("hbm_knee", string.format("%d SMs: %.0f GB/s, %d SMs: %.0f GB/s: %.1f%% of the whole device " ..
    "(time ratio %.3f [%.3f, %.3f] against %.3f)", knee.sms, knee.hbm_gbps, whole.sms, whole.hbm_gbps,
    100 * knee.hbm_gbps / whole.hbm_gbps, ratio, ci[1], ci[2], 1 / KNEE_FRACTION), holds, detail)
  local d2, ratio2, ci2, detail2 = lab:compare(knee.l2, whole.l2, { margin = 0.01, against = L2_GAIN })
  local holds2 = ({ slower = true, faster = false })[d2]
  lab:verdict("l2_scales", string.format("L2 re-read: %d SMs %.0f GB/s, %d SMs %.0f GB/s (time ratio %.3f " ..
    "[%.3f, %.3f] against %.2f)", knee.sms, knee.l2_gbps, whole.sms, whole.l2_gbps, ratio2, ci2[1], ci2[2],
    L2_GAIN), holds2, detail2)
else
  local why = partitions_ok and ("no " .. KNEE_SMS .. "-SM partition on a device of " .. dev.sm_count .. " SMs")
    or ("no SM partitions: " .. tostring(partitions_why))
  lab:verdict("hbm_knee", why, nil)
  lab:verdict("l2_scales", why, nil)
end

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: a hot set in L2 under streaming traffic")
local l2_api = type(cuda.l2_persisting) == "function" and type(cuda.l2_reset) == "function"
local stream = cuda.stream { nonblocking = true }
local hcfg = { grid = dev.sm_count * read_per_sm, block = BLOCK, stream = stream }
local hot_bytes = L2_N16 * 16
local window, granted
if l2_api then
  local ok, g = pcall(cuda.l2_persisting, hot_bytes)
  if ok then
    granted = g
    window = { array = hot, hit_ratio = math.min(1, granted / hot_bytes), hit = "persisting", miss = "streaming" }
    lab:note(string.format("persisting set-aside: asked %s, granted %s (the device's maximum: %s); window over " ..
      "the %s hot set, hit_ratio %.3f", bytes_mib(hot_bytes), bytes_mib(granted),
      bytes_mib(dev:attribute("MAX_PERSISTING_L2_CACHE_SIZE")), bytes_mib(hot_bytes), window.hit_ratio))
    cuda.l2_persisting(0) -- the run without a window first, with no set-aside
  else
    l2_api = false
    lab:note("cuda.l2_persisting failed: " .. tostring(g))
  end
end

local function hot_read(with_window, c)
  hcfg.l2_window = with_window and window or nil
  K.read16:launch(hcfg, hot, L2_N16, 1, c or counter)
end

local function cold_measure(with_window)
  -- cold: cuda.measure writes twice the L2 before every sample (streaming traffic); persisting lines
  -- must survive it, so the reset of persisting lines before each sample is turned off
  local fn = function() hot_read(with_window) end
  local ok, r = pcall(measure, fn, stream, { regime = "cold", l2_reset = false })
  if not ok and tostring(r):find("unknown field 'l2_reset'", 1, true) then
    ok, r = pcall(measure, fn, stream, { regime = "cold" }) -- a cold regime that never resets
  end
  if not ok then error(r, 0) end
  return r
end

if l2_api then
  local without = cold_measure(false)
  cuda.l2_persisting(granted)
  local with = cold_measure(true)
  stream:sync(WAIT)
  local got = count_with(function(c) hcfg.stream = nil; hot_read(true, c); hcfg.stream = stream end)
  if got ~= hot_sum then
    valid.hot = false
    lab:fail(string.format("read16 of the hot set summed %d, expected %d", got, hot_sum))
  end
  local d, ratio, ci, detail = lab:compare(with, without, { margin = 0.05 })
  if not valid.hot then d = "invalid" end
  lab:verdict("persist_time", string.format("%s hot set after a %s flush: %s with the window, %s without " ..
    "(ratio %.3f [%.3f, %.3f])", bytes_mib(hot_bytes), bytes_mib((with.flush and with.flush.bytes) or 2 * dev.l2_bytes),
    harness.format_result(with, "ms"), harness.format_result(without, "ms"), ratio, ci[1], ci[2]),
    ({ faster = true, slower = false, same = false })[d], detail)
  lab:record("persist_time", { with_ms = with.mean, without_ms = without.mean, ratio = ratio, ci = ci,
    l2_reset = with.l2_reset, granted = granted })

  -- The share of each hot read that L2 served, from CUPTI's DRAM read bytes. Not from
  -- lts__t_sector_hit_rate: under kernel replay the L2 counters come from a replayed pass that finds
  -- the first pass's data in L2 (a first read of a set never touched shows about 70% "hits" while
  -- the DRAM bytes equal the set; tools/l2_hit_probe.lua, docs/RESULTS.md section 25), and the H200's
  -- two L2 partitions count a far hit as a near miss. dram__bytes_read.sum needs one pass. A control
  -- re-read right after a read (nothing in between) shows that the profiler keeps L2 between kernels.
  -- The window is the stream's here (s:set_l2_window), not the launch key: under cuda.profile a
  -- launch's own l2_window left the hot set to the scan (16 of 16 MiB from DRAM) while the same
  -- window on the stream kept it (1.5 MiB from DRAM; tools/l2_hit_probe.lua window, RESULTS section 25).
  -- The read under the window must bring the hot set in from DRAM: a read that finds the lines
  -- already in L2 as normal ones kept only half of them through the scan (RESULTS section 25), so a
  -- scan evicts the set first, and launch 6's DRAM bytes show that it came from DRAM.
  local scan_cfg = { grid = dev.sm_count * read_per_sm, block = BLOCK, stream = stream }
  local function scan() K.read16:launch(scan_cfg, src, N16, 1, counter) end
  local function sequence()
    hot_read(false)
    hot_read(false)                                     -- 2: control, warm re-read
    scan()                                              -- 3
    hot_read(false)                                     -- 4: without a window
    scan()                                              -- 5: evicts the hot set
    stream:set_l2_window(window)
    hot_read(false)                                     -- 6: from DRAM, into persisting lines
    scan()                                              -- 7
    hot_read(false)                                     -- 8: with the window
    stream:set_l2_window(nil)
  end
  local METRIC = "dram__bytes_read.sum"
  local ok, rows = pcall(cuda.profile, sequence, { metrics = { METRIC } })
  stream:set_l2_window(nil) -- also when cuda.profile raised inside the sequence
  local function served_pct(row)
    local b = row and row.metrics[METRIC]
    return b and 100 * math.max(0, 1 - b / hot_bytes) or nil
  end
  if ok and #rows == 8 then
    local control, without_hit, with_hit = served_pct(rows[2]), served_pct(rows[4]), served_pct(rows[8])
    local install = served_pct(rows[6])
    lab:table({ "hot read", "bytes from DRAM", "served by L2 (%)" }, {
      { "right after another read (control)", bytes_mib(rows[2].metrics[METRIC] or 0),
        string.format("%.1f", control or -1) },
      { "after a scan, no window", bytes_mib(rows[4].metrics[METRIC] or 0), string.format("%.1f", without_hit or -1) },
      { "evicted, then read under the window", bytes_mib(rows[6].metrics[METRIC] or 0),
        string.format("%.1f", install or -1) },
      { "after a scan, persisting window", bytes_mib(rows[8].metrics[METRIC] or 0),
        string.format("%.1f", with_hit or -1) } })
    local measured = string.format("share of the %s hot set served by L2 after a %s scan: %.1f%% with the " ..
      "window, %.1f%% without (control re-read %.1f%%; %s)", bytes_mib(hot_bytes), bytes_mib(N16 * 16),
      with_hit or -1, without_hit or -1, control or -1, METRIC)
    local holds
    if not valid.hot then
      measured = measured .. "; the hot read's sum was wrong: nothing is judged"
    elseif install and install > 50 then
      measured = measured .. string.format("; the scan before the window's first read left %.1f%% of the set " ..
        "in L2, so the window did not bring it in: nothing is judged", install)
    elseif control and with_hit and without_hit and control >= 80 then
      holds = with_hit >= 80 and without_hit <= 50
    else
      measured = measured .. "; the control read did not come from L2, so the profiler's own handling of L2 " ..
        "between kernels decides these numbers"
    end
    lab:verdict("persist_hits", measured, holds)
    lab:record("persist_hits", { with_pct = with_hit, without_pct = without_hit, control_pct = control,
      metric = METRIC })
  else
    lab:verdict("persist_hits", "cuda.profile could not read " .. METRIC .. ": " ..
      (ok and string.format("%d rows for 8 launches", #rows) or tostring(rows)), nil)
  end
  -- leave nothing persisting behind: later cold samples must be cold
  cuda.l2_reset()
  cuda.l2_persisting(0)
else
  local why = "no L2 residency API in this gpulab (cuda.l2_persisting / cuda.l2_reset)"
  lab:verdict("persist_time", why, nil)
  lab:verdict("persist_hits", why, nil)
end
stream:sync(WAIT)
stream:free()

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: latency per level (pointer chase)")
local chain = cuda.array("u64", 1 << 26) -- 512 MiB: room for the HBM chain
local chase_out = cuda.array("u64", 3)
local chase_h = cuda.host("u64", 3)
local LEVELS = {
  -- stride in 8-byte words: nodes 128 B apart (L1, L2) and 256 B apart (HBM)
  { name = "L1", nodes = 64, stride = 16, step = 37, cg = 0, warm = 256 },          -- 8 KiB
  { name = "L2", nodes = 8192, stride = 16, step = 3001, cg = 1, warm = 16384 },    -- 1 MiB, ld.global.cg
  { name = "HBM", nodes = 1 << 21, stride = 32, step = 1000003, cg = 1, warm = 0 }, -- 512 MiB
}
local lat = {}
for _, L in ipairs(LEVELS) do
  K.make_chain:launch({ grid = grid_for(L.nodes), block = BLOCK }, chain, L.nodes, L.stride, L.step)
  cuda.sync(WAIT)
  local cycles, ns = {}, {}
  for run = 0, P.chase_runs - 1 do
    -- the HBM chase continues where the last one stopped, so no node is visited twice; a scan of
    -- the copy source first evicts the chain lines make_chain left in L2
    local start_node = L.warm == 0 and (run * P.hops * L.step) % L.nodes or 0
    if L.warm == 0 then K.read16:launch({ grid = dev.sm_count * read_per_sm, block = BLOCK }, src, N16, 1, counter) end
    K.chase:launch({ grid = 1, block = 1 }, chain, start_node * L.stride, L.warm, P.hops, L.cg, chase_out)
    cuda.sync(WAIT)
    chase_h:copy_from(chase_out)
    local want = ((start_node + (L.warm + P.hops) * L.step) % L.nodes) * L.stride
    if chase_h[3] ~= want then
      valid.chase = false
      lab:fail(string.format("%s chase ended at word %d, expected %d", L.name, chase_h[3], want))
    end
    cycles[#cycles + 1] = chase_h[1] / P.hops
    ns[#ns + 1] = chase_h[2] / P.hops
  end
  lat[L.name] = { cycles = harness.summarize(cycles), ns = harness.summarize(ns), level = L }
end
local lrows = {}
for _, L in ipairs(LEVELS) do
  local r = lat[L.name]
  lrows[#lrows + 1] = { L.name, bytes_mib(L.nodes * L.stride * 8), L.nodes, L.cg == 1 and "ld.global.cg" or
    "ld.global.ca", string.format("%.1f [%.1f, %.1f]", r.cycles.mean, r.cycles.ci95[1], r.cycles.ci95[2]),
    string.format("%.1f", r.ns.mean), string.format("%.0f", r.cycles.mean / r.ns.mean * 1000) }
  lab:record("latency_" .. L.name, { cycles = r.cycles.mean, cycles_ci = r.cycles.ci95, ns = r.ns.mean })
end
lab:table({ "level", "footprint", "nodes", "load", "cycles per hop [95% CI]", "ns per hop (%globaltimer)",
  "SM clock implied (MHz)" }, lrows)
lab:note(string.format("cycles from clock64 around the timed hops, ns from %%globaltimer around the same hops; the " ..
  "device attribute CLOCK_RATE says %.0f MHz (the boost clock: a lower implied clock means the SM ran slower). " ..
  "The HBM chase jumps about 244 MiB per hop across 512 MiB: its hops include the TLB misses such jumps cause",
  dev:attribute("CLOCK_RATE") / 1000))
local l1, l2, hbm = lat.L1.cycles, lat.L2.cycles, lat.HBM.cycles
local order
if l1.ci95[2] * 1.5 < l2.ci95[1] and l2.ci95[2] * 1.5 < hbm.ci95[1] then
  order = true
elseif l1.mean >= l2.mean or l2.mean >= hbm.mean then
  order = false
end
if not valid.chase then order = nil end
lab:verdict("latency_order", string.format("L1 %.1f, L2 %.1f, HBM %.1f cycles per hop (%.1f, %.1f, %.1f ns): " ..
  "L2/L1 %.2fx, HBM/L2 %.2fx", l1.mean, l2.mean, hbm.mean, lat.L1.ns.mean, lat.L2.ns.mean, lat.HBM.ns.mean,
  l2.mean / l1.mean, hbm.mean / l2.mean), order, { results = { l1, l2, hbm } })

-- Against the published figures, by the harness's own rule for an interval against a value ± margin:
-- a level whose interval lies inside the band is "same", one wholly outside it refutes the claim.
local pub_rows, pub_parts, pub_decisions = {}, {}, {}
for _, ref in ipairs(PUBLISHED) do
  local r = ref.unit == "cycles" and lat[ref.level].cycles or lat[ref.level].ns
  pub_decisions[#pub_decisions + 1] = harness.decide(r.ci95, PUBLISHED_MARGIN, ref.value)
  local ratio = r.mean / ref.value
  pub_rows[#pub_rows + 1] = { ref.level, ref.unit, string.format("%.1f", ref.value), string.format("%.1f", r.mean),
    string.format("%.3f", ratio) }
  pub_parts[#pub_parts + 1] = string.format("%s %.1f %s against %.1f (%.3fx)", ref.level, r.mean, ref.unit,
    ref.value, ratio)
end
lab:table({ "level", "unit", "published (H800 PCIe)", "measured (this GPU)", "measured / published" }, pub_rows)
lab:verdict("latency_published", table.concat(pub_parts, ", ") .. string.format(" (margin %d%%)",
  PUBLISHED_MARGIN * 100), harness.holds(pub_decisions, { holds = { "same" }, refuted = { "faster", "slower" },
  valid = valid.chase }), { results = { lat.L1.cycles, lat.L2.ns, lat.HBM.ns } })
chain:free()

-- ---------------------------------------------------------------------------------------------
lab:section("Little's law: bytes in flight per SM")
local hbm_ns = lat.HBM.ns.mean
if not valid.chase or hbm_ns <= 0 then valid.bandwidth = false end
local capacity = copy_per_sm * BLOCK * 4 * 16 -- bytes the resident threads can have in flight per SM
if #bw > 0 then
  local rows = {}
  for _, r in ipairs(bw) do
    -- copy16 reads N16 and writes N16 16-byte elements, and hbm_gbps counts both (hbm_bytes =
    -- 2 x N16 x 16); the capacity counts loads only, so the bytes in flight are the read half of
    -- the bandwidth times the latency (stores do not wait for the data to come back)
    r.read_gbps = r.hbm_gbps / 2
    local in_flight = r.read_gbps * hbm_ns / r.sms -- GB/s = bytes/ns
    r.in_flight = in_flight
    rows[#rows + 1] = { r.sms, string.format("%.0f", r.hbm_gbps), string.format("%.0f", r.read_gbps),
      string.format("%.0f", hbm_ns), string.format("%.1f KiB", in_flight / 1024),
      string.format("%.0f%%", 100 * in_flight / capacity) }
  end
  lab:table({ "SMs", "HBM copy GB/s (read + write)", "HBM read GB/s", "HBM latency (ns, idle)",
    "bytes in flight per SM (loads)", "of the kernel's capacity" }, rows)
  lab:note(string.format("capacity: %d blocks x %d threads x 4 loads x 16 B = %.0f KiB per SM; the latency is the " ..
    "idle pointer chase's, so under load (queues) the true figure is larger", copy_per_sm, BLOCK, capacity / 1024))
  local few = bw[1]
  local holds
  if valid.bandwidth then holds = few.in_flight <= capacity end
  lab:verdict("littles_law", string.format("%d SMs: %.0f GB/s read (half of the %.0f GB/s copy) x %.0f ns / %d = " ..
    "%.1f KiB of loads in flight per SM, capacity %.0f KiB", few.sms, few.read_gbps, few.hbm_gbps, hbm_ns, few.sms,
    few.in_flight / 1024, capacity / 1024), holds)
else
  lab:verdict("littles_law", "no bandwidth per SM count: " .. tostring(partitions_why), nil)
end

src:free(); dst:free(); hot:free(); counter:free()
cuda.sync(WAIT)
os.exit(lab:finish())

-- launch_anatomy.lua — seed §1: from host launch to instruction issue.
--
-- Claims: a grid is logical work, not that many blocks running at once; how many blocks an SM
-- holds is set by the compiled resources and the architecture (ask the occupancy API); block
-- order must not be assumed from blockIdx; a launch returns to the CPU long before the GPU is
-- done. Every block of the recording kernel writes its SM (%smid), start and end time
-- (%globaltimer, ns) and how many warps it had, so the lab can see placement and overlap.
-- The order claim is tested where it can show: a launch whose block 0 has ten times the work
-- of the others, so a block that starts first is seen to finish last, every run.
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "launch_anatomy",
  title = "Launch anatomy: blocks, warps, residency and asynchrony",
  claims = "seed §1",
  params = {
    { name = "grid", default = 100, min = 1, max = 1000000, help = "blocks in the seed's example launch" },
    { name = "block", default = 256, min = 32, max = 1024, multiple_of = 32, help = "threads per block" },
    { name = "waves", default = 4, min = 2, max = 64, help = "waves of the multi-wave launch" },
    { name = "busy_us", default = 20, min = 1, max = 100000, help = "how long each block stays resident (µs)" },
    { name = "slow_factor", default = 10, min = 2, max = 1000,
      help = "block 0's work in the unequal-work launch, as a multiple of the others'" },
    { name = "long_ms", default = 50, quick = 20, min = 1, max = 5000, help = "GPU time of the long kernel (ms)" },
    { name = "async_reps", default = 5, quick = 3, min = 1, max = 100, help = "repetitions of the asynchrony test" },
  },
}
local P = lab.params
lab:claim { id = "threads", seed = "§1", text = "grid=100, block=256 gives 25,600 threads and 8 warps per block" }
lab:claim { id = "residency", seed = "§1", text =
  "how many blocks are resident depends on threads, registers, shared " ..
  "memory and architecture limits; query them for the target architecture and the compiled resources" }
lab:claim { id = "smem_limit", seed = "§1", text = "shared memory per block is one of the residency limits" }
lab:claim { id = "logical_work", seed = "§1", text = "blocks of a grid are logical work, not that many concurrently " ..
  "running blocks" }
lab:claim { id = "block0_order", seed = "§1", text = "block order must not be assumed from blockIdx: blockIdx.x=0 " ..
  "is not guaranteed to finish first" }
lab:claim { id = "async", seed = "§1",
  text = "a launch is asynchronous: the CPU returning does not mean the GPU finished" }

-- ---------------------------------------------------------------------------------------------
lab:section("Setup")
local prog = lab:compile("kernels/launch_anatomy.cu",
  { arch = "sm_90a", std = "c++17", what = "record_blocks, busy_wait" })

local threads = P.grid * P.block
local warps_per_block = P.block // 32
lab:note(string.format("the seed's example: grid=%d x block=%d = %d threads, %d warps per block, %d warps in all",
  P.grid, P.block, threads, warps_per_block, P.grid * warps_per_block))

lab:require_gpu()

local dev = cuda.device(0)
local mod = cuda.load(prog)
local record = mod:kernel("record_blocks")
local busy = mod:kernel("busy_wait")
local per_sm, limiter = record:occupancy(P.block, 0)
lab:note(string.format("%s: %d SMs; record_blocks uses %d registers/thread, %d B static smem",
  dev.name, dev.sm_count, record.regs, record.smem))
lab:note(string.format("occupancy API: %d blocks of %d threads per SM (limited by %s) -> %d blocks per wave",
  per_sm, P.block, tostring(limiter), per_sm * dev.sm_count))

-- ---------------------------------------------------------------------------------------------
-- One launch of record_blocks; returns per-block records (1-based by blockIdx.x + 1).
local function record_launch(grid, smem, slow_ns)
  local start_d, end_d = cuda.array("u64", grid), cuda.array("u64", grid)
  local sm_d, warps_d = cuda.array("u32", grid), cuda.array("u32", grid)
  local seen_d = cuda.array("u64", 1)
  seen_d:fill(0)
  record:launch({ grid = grid, block = P.block, smem = smem or 0 }, start_d, end_d, sm_d, warps_d, seen_d,
    P.busy_us * 1000, 0, slow_ns or P.busy_us * 1000)
  cuda.sync { timeout = 30 }
  local function fetch(d)
    local h = cuda.host(d.dtype, d.numel)
    h:copy_from(d)
    return h
  end
  local s, e, sm, w, seen = fetch(start_d), fetch(end_d), fetch(sm_d), fetch(warps_d), fetch(seen_d)
  local blocks = {}
  for b = 1, grid do blocks[b] = { start = s[b], finish = e[b], sm = sm[b], warps = w[b] } end
  for _, d in ipairs { start_d, end_d, sm_d, warps_d, seen_d } do d:free() end
  return blocks, seen[1]
end

-- Most intervals open at once in a list of {start, +1} / {finish, -1} events.
local function peak_overlap(ev)
  -- an end and a start at the same nanosecond do not overlap: ends first
  table.sort(ev, function(a, b) if a[1] ~= b[1] then return a[1] < b[1] end return a[2] < b[2] end)
  local cur, peak = 0, 0
  for _, e in ipairs(ev) do
    cur = cur + e[2]
    if cur > peak then peak = cur end
  end
  return peak
end

-- Peak blocks resident at once on one SM and on the whole GPU, and the number of SMs used.
local function residency(blocks)
  local per_sm_events, all = {}, {}
  for _, b in ipairs(blocks) do
    per_sm_events[b.sm] = per_sm_events[b.sm] or {}
    local ev = per_sm_events[b.sm]
    ev[#ev + 1] = { b.start, 1 }
    ev[#ev + 1] = { b.finish, -1 }
    all[#all + 1] = { b.start, 1 }
    all[#all + 1] = { b.finish, -1 }
  end
  local peak, used = 0, 0
  for _, ev in pairs(per_sm_events) do
    used = used + 1
    peak = math.max(peak, peak_overlap(ev))
  end
  return peak, used, peak_overlap(all)
end

local function finished_before_block0(blocks)
  local n = 0
  for b = 2, #blocks do if blocks[b].finish < blocks[1].finish then n = n + 1 end end
  return n
end

local function started_before_block0(blocks)
  local n = 0
  for b = 2, #blocks do if blocks[b].start < blocks[1].start then n = n + 1 end end
  return n
end

-- Blocks that started together with block 0 (within half of one block's work) and yet
-- finished before it.
local function overtook_block0(blocks)
  local n, window = 0, P.busy_us * 500
  for b = 2, #blocks do
    if blocks[b].start <= blocks[1].start + window and blocks[b].finish < blocks[1].finish then n = n + 1 end
  end
  return n
end

local function analyse(label, grid, smem, predicted, slow_ns)
  local blocks, seen = record_launch(grid, smem, slow_ns)
  local bad_warps, bad_times = 0, 0
  for _, b in ipairs(blocks) do
    if b.warps ~= warps_per_block then bad_warps = bad_warps + 1 end
    if b.finish < b.start or b.start == 0 then bad_times = bad_times + 1 end
  end
  -- every later claim reads these records: they must account for every thread and block
  local valid = seen == grid * P.block and bad_warps == 0 and bad_times == 0
  if not valid then
    lab:fail(string.format("%s: the records are wrong (%d threads counted of %d, %d bad warp counts, %d bad times)",
      label, seen, grid * P.block, bad_warps, bad_times))
  end
  local peak, sms, gpu_peak = residency(blocks)
  local t0, t1 = math.huge, 0
  for _, b in ipairs(blocks) do
    t0 = math.min(t0, b.start)
    t1 = math.max(t1, b.finish)
  end
  return {
    label = label, grid = grid, blocks = blocks, threads_seen = seen, bad_warps = bad_warps, peak = peak,
    gpu_peak = gpu_peak,
    sms = sms, before0 = finished_before_block0(blocks), started_before0 = started_before_block0(blocks),
    overtook0 = overtook_block0(blocks),
    span_us = (t1 - t0) / 1e3, t0 = t0, predicted = predicted or per_sm, valid = valid,
  }
end

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: where and when blocks ran")
local wave = per_sm * dev.sm_count
-- Shared memory is a residency limit too: the same kernel asking for 64 KiB of dynamic shared
-- memory per block (it touches none of it) should fit fewer blocks per SM.
local SMEM = 64 * 1024
record:set_max_dynamic_smem(SMEM)
local smem_per_sm, smem_limiter = record:occupancy(P.block, SMEM)
-- Unequal work: block 0 holds its SM slow_factor times longer than every other block, in a
-- grid that fits in one wave, so all blocks start together and the order claim can show.
local one_wave = math.min(P.grid, wave)
local runs = {
  analyse("seed example", P.grid),
  analyse(string.format("%d waves", P.waves), wave * P.waves),
  analyse(string.format("%d waves, 64 KiB smem", P.waves), smem_per_sm * dev.sm_count * P.waves, SMEM, smem_per_sm),
  analyse(string.format("block 0 does %dx the work", P.slow_factor), one_wave, 0, nil,
    P.busy_us * 1000 * P.slow_factor),
}
lab:note(string.format("with %d B of dynamic shared memory per block the occupancy API predicts %d blocks/SM (%s)",
  SMEM, smem_per_sm, tostring(smem_limiter)))
local rows = {}
for _, r in ipairs(runs) do
  rows[#rows + 1] = { r.label, r.grid, r.grid * P.block, r.threads_seen, r.sms, r.predicted, r.peak, r.gpu_peak,
    r.before0, r.started_before0, r.overtook0, string.format("%.1f", r.span_us) }
end
lab:table({ "launch", "blocks", "threads (computed)", "threads (counted)", "SMs used", "predicted/SM",
  "observed peak/SM", "peak on GPU", "finished before block 0", "started before block 0",
  "started with block 0, finished before it", "span (µs)" }, rows)

for _, r in ipairs(runs) do
  lab:record(r.label, { grid = r.grid, threads_seen = r.threads_seen, sms_used = r.sms, predicted_per_sm = per_sm,
    observed_peak_per_sm = r.peak, observed_peak_gpu = r.gpu_peak, finished_before_block0 = r.before0,
    span_us = r.span_us })
end

local ex, multi = runs[1], runs[2]
local valid = ex.valid and multi.valid
lab:verdict("threads", string.format("grid=%d, block=%d: %d threads counted by the kernel (%d computed), %d blocks " ..
  "reported a warp count other than %d", P.grid, P.block, ex.threads_seen, threads, ex.bad_warps, warps_per_block),
  ex.threads_seen == threads and ex.bad_warps == 0)
local smem_run = runs[3]
lab:verdict("residency",
  string.format("predicted %d blocks/SM (%s); observed peak %d/SM in the %d-wave launch, %d/SM in the seed example",
    per_sm, tostring(limiter), multi.peak, P.waves, ex.peak),
  valid and multi.peak == per_sm and ex.peak <= per_sm)
lab:verdict("smem_limit",
  string.format("64 KiB dynamic smem: predicted %d blocks/SM, observed peak %d/SM (without it: %d)", smem_per_sm,
    smem_run.peak, multi.peak),
  smem_run.valid and smem_run.peak == smem_per_sm and smem_per_sm < per_sm)
-- The seed's point: a grid is logical work; how much of it runs at once is the GPU's capacity.
local capacity = per_sm * dev.sm_count
lab:verdict("logical_work",
  string.format("capacity %d blocks (%d/SM x %d SMs); seed example: %d of %d at once over %d SMs; "
    .. "%d-wave: %d of %d at once",
    capacity, per_sm, dev.sm_count, ex.gpu_peak, P.grid, ex.sms, P.waves, multi.gpu_peak, multi.grid),
  valid and multi.gpu_peak <= capacity and multi.gpu_peak < multi.grid
    and ex.gpu_peak <= math.min(P.grid, capacity))
-- The unequal-work launch decides it: every block that started with block 0 has a tenth of its
-- work, so it finishes first whatever the dispatch order; if none did, completion would follow
-- blockIdx and the claim is refuted. Equal-work launches only show what the dispatcher happened to do.
local uneq = runs[4]
lab:verdict("block0_order",
  string.format("block 0 with %dx the work: %d of %d blocks started with it (within %.0f µs) and finished " ..
    "before it; " ..
    "equal work: %d finished before block 0 in the seed example, %d in the %d-wave launch",
    P.slow_factor, uneq.overtook0, uneq.grid - 1, P.busy_us / 2, ex.before0, multi.before0, P.waves),
  (function()
    if not uneq.valid then return nil end -- records that do not add up decide nothing
    return uneq.overtook0 > 0
  end)())

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: the CPU returns before the GPU finishes")
local stream = cuda.stream { nonblocking = true }
local ran = cuda.array("u64", 1)
local e0, e1 = cuda.event(), cuda.event()
busy:launch({ grid = 1, block = 32, stream = stream }, 1000, ran) -- warm: module and launch path
stream:sync { timeout = 10 }
local ran_h = cuda.host("u64", 1)
local reps, worst_launch_us, least_gpu_ms, any_done = {}, 0, math.huge, false
for i = 1, P.async_reps do
  local h0 = cuda.now()
  e0:record(stream)
  busy:launch({ grid = 1, block = 1, stream = stream }, P.long_ms * 1000000, ran)
  local h_launch = cuda.now()
  e1:record(stream)
  local done_early = stream:query()
  stream:sync { timeout = P.long_ms / 1000 * 10 + 5 }
  local h_sync = cuda.now()
  local gpu_ms = e1:elapsed(e0)
  ran_h:copy_from(ran)
  local launch_us = (h_launch - h0) * 1e6
  reps[i] = { i, string.format("%.1f µs", launch_us), done_early and "complete" or "still running",
    string.format("%.2f ms", (h_sync - h0) * 1e3), string.format("%.2f ms", gpu_ms),
    string.format("%.2f ms", ran_h[1] / 1e6) }
  worst_launch_us = math.max(worst_launch_us, launch_us)
  least_gpu_ms = math.min(least_gpu_ms, gpu_ms)
  any_done = any_done or done_early
  if math.abs(ran_h[1] / 1e6 - P.long_ms) > P.long_ms * 0.1 + 0.1 then
    lab:fail(string.format("busy_wait ran %.3f ms, asked for %d ms", ran_h[1] / 1e6, P.long_ms))
  end
end
lab:table({ "rep", "k:launch returned after", "stream:query() right after", "stream:sync returned after",
  "GPU: events around the kernel", "GPU: kernel's own %globaltimer" }, reps)
lab:record("async", { worst_launch_us = worst_launch_us, least_gpu_ms = least_gpu_ms, reps = P.async_reps })
lab:verdict("async",
  string.format("over %d launches: slowest launch call %.1f µs vs shortest GPU time %.2f ms (%.0fx); query right " ..
    "after the launch: %s", P.async_reps, worst_launch_us, least_gpu_ms,
    least_gpu_ms * 1e3 / math.max(worst_launch_us, 1e-3), any_done and "complete at least once" or "always running"),
  worst_launch_us * 10 < least_gpu_ms * 1e3 and not any_done)
ran:free()
stream:free()

-- ---------------------------------------------------------------------------------------------
lab:section("Picture: one row per SM")
local function timeline(run, file)
  local by_sm = {}
  for b, rec in ipairs(run.blocks) do
    by_sm[rec.sm] = by_sm[rec.sm] or {}
    local spans = by_sm[rec.sm]
    spans[#spans + 1] = { (rec.start - run.t0) / 1e3, (rec.finish - run.t0) / 1e3, label = tostring(b - 1) }
  end
  local ids = {}
  for sm in pairs(by_sm) do ids[#ids + 1] = sm end
  table.sort(ids)
  local rows_ = {}
  for _, sm in ipairs(ids) do rows_[#rows_ + 1] = { label = "SM " .. sm, spans = by_sm[sm] } end
  lab:svg_timeline { file = file, title = string.format("%s: %d blocks of %d threads", run.label, run.grid, P.block),
    x_label = "µs since the first block started", rows = rows_ }
end
timeline(ex, "launch_anatomy_example.svg")
timeline(multi, "launch_anatomy_waves.svg")
timeline(runs[3], "launch_anatomy_waves_smem.svg")
timeline(uneq, "launch_anatomy_unequal.svg")
lab:note("each bar is one block (labelled with blockIdx.x); bars stacked in a row overlapped on that SM")

os.exit(lab:finish())

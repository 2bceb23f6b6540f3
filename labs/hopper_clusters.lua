-- hopper_clusters.lua — what Hopper's launch features buy, measured: thread-block clusters and how
-- many fit at once (seed §1's residency, carried to clusters), distributed shared memory (DSM)
-- latency and bandwidth, TMA multicast (seed §3's TMA, carried to clusters), programmatic
-- dependent launch (PDL) and cooperative launches against kernel boundaries.
--
-- Kernels: kernels/hopper_clusters.cu; device helpers: kernels/include/gpulab/cluster.cuh. Every
-- kernel result that a verdict reads is checked against what the host computes (outputs are
-- poisoned, or start from zero where the kernel accumulates); every wait that can hang has a
-- %globaltimer deadline; times are cuda.measure results and comparisons decide from intervals.
--
-- H200, two runs (quick and full) at the first version of this lab: the recorded peak equals
-- k:max_active_clusters for every cluster size and both block shapes (1 CTA/SM: 132, 66, 30, 15, 7
-- clusters); a dependent DSM load ~197 cycles against ~28 local (~38 through the cluster window to its
-- own CTA); the neighbour's smem at 2.9-4.1 KB/ns (GPU total) against 20-30 for one's own; multicast
-- 4-8% faster for N = 2, 4, but L2 serves 0.81x and 0.62x the sectors (not 1/N: each-CTA loads of
-- one tile at the same moment already cost L2 less than the bytes they ask for); PDL median gap
-- 2.4-2.8 µs against 3.1-4.6, chain of 32 0.67-0.84x the time; grid.sync 1.35 µs a step against
-- 3.8-5.3 µs per launch. Those runs took the gap to the next kernel's first block start, before
-- griddepcontrol.wait, and timed the chain and the launches with the host enqueueing as they ran.
-- Now (docs/RESULTS.md §45, two leases): the chain queued whole behind a hold kernel, the gap past
-- griddepcontrol.wait is 0.58-0.64 µs with PDL against 1.60 µs without (32 ns timer ticks); the
-- chain's GPU time 0.59-0.63x, a grid.sync() step 0.64-0.68x of a queued launch per step.
--
--   gpulab labs/hopper_clusters.lua [--quick] [--json FILE] [--svg PREFIX]
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "hopper_clusters",
  title = "Clusters, distributed shared memory, TMA multicast, PDL and cooperative launches: what each buys",
  claims = "seed §1 (residency) and §3 (TMA), carried to clusters; the rest the lab's own questions",
  budget_s = 240, quick_budget_s = 25,
  params = {
    { name = "hold_us", default = 200, quick = 100, min = 20, max = 100000,
      help = "how long each cluster stays resident in the co-residency launch (µs)" },
    { name = "waves", default = 3, quick = 2, min = 2, max = 20,
      help = "clusters launched, as a multiple of what the occupancy API says fits" },
    { name = "chase_steps", default = 8000, quick = 4000, min = 64, max = 1000000,
      help = "dependent loads in the DSM latency chain (not a multiple of 4096: the end index is checked)" },
    { name = "stream_reps", default = 64, quick = 16, min = 1, max = 100000,
      help = "passes over the neighbour's 64 KB buffer in the DSM bandwidth kernel" },
    { name = "tiles", default = 256, quick = 64, min = 1, max = 100000, help = "tiles per cluster (TMA multicast)" },
    { name = "chain", default = 32, min = 2, max = 256,
      help = "kernels in the PDL chain (at most 256: a measured sample is queued whole behind a spin kernel)" },
    { name = "chain_runs", default = 7, quick = 3, min = 1, max = 100, help = "recorded runs of the PDL chain" },
    { name = "coop_steps", default = 64, quick = 32, min = 2, max = 256,
      help = "steps of the cooperative kernel (grid.sync() between them; at most 256: one launch per step is " ..
        "queued whole behind a spin kernel)" },
    { name = "min_time", default = 0.3, quick = 0.08, min = 0.01, max = 60,
      help = "cuda.measure's measuring time per configuration (s)" },
  },
}
local P = lab.params
-- the rules some verdicts are decided by (labs/lib/lab_rules.lua; tests/lua/test_lab_rules.lua runs them)
package.path = lab.dir .. "/lib/?.lua;" .. package.path
local rules = require("lab_rules")

lab:claim { id = "residency", seed = "§1", text = "how many blocks are resident is set by the resources and " ..
  "the architecture and is to be queried: for clusters of 1, 2, 4, 8 and 16 CTAs, k:max_active_clusters equals " ..
  "the peak number of clusters the kernel itself records running at once" }
lab:claim { id = "dsm_latency", own = true, text = "a dependent ld.shared::cluster into another CTA's shared memory " ..
  "takes more cycles than a local ld.shared" }
lab:claim { id = "dsm_bandwidth", own = true, text = "reading the neighbour CTA's shared memory (DSM) is slower " ..
  "than reading one's own, at every cluster size from 2 to 16" }
lab:claim { id = "mc_bytes", own = true, text = "a TMA load multicast to the N CTAs of a cluster (N = 2, 4) cuts " ..
  "the L2->SM bytes the counters see to about 1/N of N CTAs each loading the tile (at most 1.25/N)" }
lab:claim { id = "mc_time", seed = "§3", text = "TMA pays off only where setup and synchronisation are amortised: " ..
  "carried to clusters, the question is whether one multicast load for N CTAs is faster than N loads of the " ..
  "same tile (measured, not assumed: multicast has made real kernels slower on the H200)" }
lab:claim { id = "pdl_correct", own = true, text = "a chain of dependent kernels reading the previous output after " ..
  "griddepcontrol.wait computes the same values with and without PDL" }
lab:claim { id = "pdl_gap", own = true, text = "PDL shrinks the gap between one kernel's end and the moment the " ..
  "next one may read its output (its griddepcontrol.wait returned): the mean over the chain's pairs, 95% intervals " ..
  "apart by more than the %globaltimer's tick (the chain queued whole behind a hold kernel: the GPU's gaps, not the " ..
  "host's pace)" }
lab:claim { id = "pdl_time", own = true, text = "a chain of short dependent kernels takes less GPU time with PDL " ..
  "(each sample queued whole before it starts, so host launch overhead is not in it)" }
lab:claim { id = "coop_correct", own = true, text = "a cooperative kernel with grid.sync() between steps computes " ..
  "what one launch per step computes" }
lab:claim { id = "coop_step", own = true, text = "a grid.sync() step costs less than a kernel boundary (one launch " ..
  "per step; GPU time, each sample queued whole before it starts)" }
lab:claim { id = "coop_refused", own = true, text = "a cooperative grid one block larger than occupancy x SMs is " ..
  "refused by gpulab before the driver, with a message naming the blocks per SM and the SM count" }

local CLUSTER_SIZES = { 1, 2, 4, 8, 16 }
local MC_SIZES = { 2, 4 }
local CHASE_LOCAL, CHASE_SELF, CHASE_REMOTE = 0, 1, 2 -- dsmem_chase's modes
local CHASE_WORDS, CHASE_STEP = 4096, 97
local STREAM_WORDS, STREAM_BLOCK = 16384, 512        -- 64 KB per CTA
local MAT, BOX = 2048, 64                             -- u32 matrix for the multicast tiles, box BOX x BOX
local POISON = 0xdeadbeef
-- In-kernel deadline: 2 s, or 60 s under compute-sanitizer, where every instruction is slower.
local TIMEOUT_NS = os.getenv("GPULAB_LINEINFO") and 60000000000 or 2000000000
-- L2 -> SM traffic, as the counters of sm_90 name it; the first that exists and sees traffic decides.
local BYTE_METRICS = { "lts__t_sectors_srcunit_tex_op_read.sum", "l1tex__m_xbar2l1tex_read_bytes.sum",
  "lts__t_bytes.sum" }

local function fmt(v, d) return string.format("%." .. (d or 1) .. "f", v) end
local function u32(v) return v & 0xffffffff end
local function first_line(e) return (tostring(e):match("^[^\n]*")) end

-- ---------------------------------------------------------------------------------------------
lab:section("Kernels")
local prog = lab:compile("kernels/hopper_clusters.cu", { arch = "sm_90a", what = "cluster_residency, dsmem_chase, " ..
  "dsmem_stream, tma_multicast_tiles, pdl_step, globaltimer_tick, coop_steps, coop_one_step" })
lab:note(string.format("cubin %d B; helpers from kernels/include/gpulab/cluster.cuh", #(prog.cubin or "")))

lab:require_gpu("there is no device: the kernels were compiled; nothing measured")

local dev = cuda.device(0)
local mod = cuda.load(prog)
lab:note(string.format("device: %s (%s), %d SMs, %d KB shared memory per block (opt-in)", dev.name, dev.arch,
  dev.sm_count, dev.smem_per_block_optin // 1024))

-- Runs one part of the lab; an error (a missing launch key, a CUDA failure) fails the lab and
-- leaves that part's claims unclear instead of stopping the other parts.
local function part(title, claims, fn)
  lab:section(title)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    lab:fail(title .. ": " .. tostring(err))
    for _, id in ipairs(claims) do lab:verdict(id, "not measured: " .. first_line(err), nil) end
  end
end

-- A gpulab method the launch features need; raises naming it when this gpulab lacks it.
local function need(obj, method)
  if type(obj[method]) ~= "function" then error("this gpulab has no k:" .. method .. " (Hopper launch API)", 2) end
end

local function fetch(d, first, count)
  local src = first and d:view(first, count) or d
  local h = cuda.host(d.dtype, src.numel)
  h:copy_from(src)
  return h
end

-- Quick runs stop at ±1% (or 3 s); full runs at cuda.measure's ±0.5% (or 15 s).
local function measure(fn, stream)
  return harness.measure(fn, { regime = "hot", min_time = P.min_time, max_noise = lab.quick and 0.01 or 0.005,
    timeout = lab.quick and 3 or 15, stream = stream })
end

-- For work made of short launches (the PDL chain, one launch per cooperative step: 1-5 µs each),
-- where measure()'s samples would contain the host's enqueueing: blocking=true holds the stream
-- behind a spin kernel until the whole sample is enqueued, so a sample is the GPU's time from the
-- first launch to the last. `launches` per call of fn; a sample stays within the 256 launches
-- that fit behind the spin (cuda.measure's cap for blocking=true).
local QUEUED_LAUNCHES = 256
local function measure_queued(fn, stream, launches)
  return harness.measure(fn, { regime = "hot", blocking = true, batch = math.max(1, QUEUED_LAUNCHES // launches),
    min_time = P.min_time, max_noise = lab.quick and 0.01 or 0.005, timeout = lab.quick and 3 or 15, stream = stream })
end

-- A verdict from evidence: nil (unclear) when the evidence is not valid or not decided.
local function judged(valid, holds, undecided)
  if not valid or undecided then return nil end
  return holds and true or false
end

-- Per-size decisions of lab:compare: holds when every one is "faster", refuted when any is
-- "slower" or "same", unclear otherwise.
local function all_faster(decisions)
  local against, unclear = false, false
  for _, d in ipairs(decisions) do
    if d == "slower" or d == "same" then against = true end
    if d == "unclear" then unclear = true end
  end
  if against then return false end
  if unclear or #decisions == 0 then return nil end
  return true
end

-- Most intervals open at once; an end and a start at the same nanosecond do not overlap.
local function peak_overlap(starts, ends)
  local ev = {}
  for i = 1, #starts do
    ev[#ev + 1] = { starts[i], 1 }
    ev[#ev + 1] = { ends[i], -1 }
  end
  table.sort(ev, function(a, b) if a[1] ~= b[1] then return a[1] < b[1] end return a[2] < b[2] end)
  local cur, peak = 0, 0
  for _, e in ipairs(ev) do
    cur = cur + e[2]
    if cur > peak then peak = cur end
  end
  return peak
end

local function median(list)
  local v = {}
  for i, x in ipairs(list) do v[i] = x end
  table.sort(v)
  local n = #v
  if n == 0 then return 0 / 0 end
  return n % 2 == 1 and v[(n + 1) // 2] or (v[n // 2] + v[n // 2 + 1]) / 2
end

-- ---------------------------------------------------------------------------------------------
part("1. Co-residency: the occupancy API against what the clusters record", { "residency" }, function()
  local k = mod:kernel("cluster_residency")
  need(k, "max_active_clusters")
  need(k, "set_attribute")
  k:set_attribute("non_portable_cluster_size_allowed", 1) -- clusters of 16
  local big = dev.smem_per_block_optin - k.smem
  k:set_max_dynamic_smem(big)
  -- two shapes: small blocks (many per SM) and one block per SM (all of its shared memory), where
  -- a cluster must find its SMs within one GPC
  local shapes = { { block = 128, smem = 0, what = "128 threads, no smem" },
                   { block = 128, smem = big, what = string.format("128 threads, %d KB smem", big // 1024) } }
  local rows, all_equal, all_valid, launched = {}, true, true, 0
  for _, shape in ipairs(shapes) do
    for _, cs in ipairs(CLUSTER_SIZES) do
      local predicted = k:max_active_clusters { block = shape.block, smem = shape.smem, cluster = cs }
      if predicted == 0 then
        rows[#rows + 1] = { shape.what, cs, 0, "-", "-", "-", "cannot be resident" }
      else
        local nclusters = predicted * P.waves
        local d_start, d_end = cuda.array("u64", nclusters), cuda.array("u64", nclusters)
        local d_sm, d_seen = cuda.array("u32", nclusters), cuda.array("u32", nclusters)
        d_start:fill(0)
        d_end:fill(0)
        d_seen:fill(0)
        k:launch({ grid = nclusters * cs, block = shape.block, smem = shape.smem, cluster = cs }, d_start, d_end, d_sm,
          d_seen, P.hold_us * 1000)
        cuda.sync { timeout = 30 }
        local hs, he, hseen = fetch(d_start), fetch(d_end), fetch(d_seen)
        local starts, ends, bad = {}, {}, 0
        for c = 1, nclusters do
          if hseen[c] ~= cs or hs[c] == 0 or he[c] < hs[c] then bad = bad + 1 end
          starts[c], ends[c] = hs[c], he[c]
        end
        for _, d in ipairs { d_start, d_end, d_sm, d_seen } do d:free() end
        local peak = peak_overlap(starts, ends)
        if bad > 0 then
          all_valid = false
          lab:fail(string.format("%s, cluster %d: %d of %d clusters did not record every CTA and a time", shape.what,
            cs, bad, nclusters))
        end
        launched = launched + 1
        if peak ~= predicted then all_equal = false end
        rows[#rows + 1] = { shape.what, cs, predicted, nclusters, peak, peak - predicted,
          bad == 0 and "every CTA of every cluster ran" or (bad .. " clusters incomplete") }
        lab:record(string.format("residency %s cluster %d", shape.what, cs),
          { predicted = predicted, observed_peak = peak, clusters = nclusters, incomplete = bad })
      end
    end
  end
  lab:table({ "blocks", "cluster", "k:max_active_clusters", "clusters launched", "peak resident (recorded)",
    "difference", "records" }, rows)
  local diffs = {}
  for _, r in ipairs(rows) do
    if type(r[6]) == "number" and r[6] ~= 0 then
      diffs[#diffs + 1] = string.format("%s cluster %d: %+d", r[1], r[2], r[6])
    end
  end
  lab:verdict("residency", string.format("%d configurations launched; %s", launched,
    #diffs == 0 and "the recorded peak equals the driver's count in every one" or
    ("they differ: " .. table.concat(diffs, ", "))), judged(all_valid and launched > 0, all_equal))
end)

-- ---------------------------------------------------------------------------------------------
part("2. Distributed shared memory: latency and bandwidth", { "dsm_latency", "dsm_bandwidth" }, function()
  local chase = mod:kernel("dsmem_chase")
  local d_out, d_cyc = cuda.array("u32", 1), cuda.array("u64", 1)
  local want = (P.chase_steps * CHASE_STEP) % CHASE_WORDS
  local per_mode, valid = {}, true
  for _, mode in ipairs { CHASE_LOCAL, CHASE_SELF, CHASE_REMOTE } do
    local samples = {}
    for _ = 1, 5 do
      d_out:fill(POISON)
      chase:launch({ grid = 2, block = 128, cluster = 2 }, d_out, d_cyc, CHASE_WORDS, P.chase_steps, mode)
      cuda.sync { timeout = 10 }
      local o, c = fetch(d_out), fetch(d_cyc)
      if o[1] ~= want then
        valid = false
        lab:fail(string.format("dsmem_chase mode %d ended on index %d, expected %d", mode, o[1], want))
      end
      samples[#samples + 1] = c[1] / P.chase_steps
    end
    per_mode[mode] = median(samples)
  end
  d_out:free()
  d_cyc:free()
  lab:table({ "load", "cycles per dependent load (median of 5)" }, {
    { "ld.shared (own CTA)", fmt(per_mode[CHASE_LOCAL]) },
    { "ld.shared::cluster to own CTA", fmt(per_mode[CHASE_SELF]) },
    { "ld.shared::cluster to the other CTA", fmt(per_mode[CHASE_REMOTE]) } })
  lab:record("dsm_latency_cycles", { local_ = per_mode[CHASE_LOCAL], self = per_mode[CHASE_SELF],
    remote = per_mode[CHASE_REMOTE], steps = P.chase_steps })
  lab:verdict("dsm_latency", string.format("%s cycles remote vs %s local (%.1fx); through the cluster window to " ..
    "its own CTA %s", fmt(per_mode[CHASE_REMOTE]), fmt(per_mode[CHASE_LOCAL]),
    per_mode[CHASE_REMOTE] / per_mode[CHASE_LOCAL], fmt(per_mode[CHASE_SELF])),
    judged(valid, per_mode[CHASE_REMOTE] > per_mode[CHASE_LOCAL]))

  -- bandwidth: every CTA sums its own buffer (ld.shared) or its neighbour's (ld.shared::cluster)
  local k = mod:kernel("dsmem_stream")
  need(k, "max_active_clusters")
  need(k, "set_attribute")
  k:set_attribute("non_portable_cluster_size_allowed", 1)
  local smem = STREAM_WORDS * 4
  k:set_max_dynamic_smem(smem)
  local stream = cuda.stream { nonblocking = true }
  local rows, decisions, all_valid = {}, {}, true
  local per_pass = 0
  for i = 0, STREAM_WORDS - 1 do per_pass = per_pass + i end
  for _, cs in ipairs { 2, 4, 8, 16 } do
    local nclusters = k:max_active_clusters { block = STREAM_BLOCK, smem = smem, cluster = cs }
    if nclusters > 0 then
      local grid = nclusters * cs
      local d_sums = cuda.array("u32", grid)
      local bytes = grid * smem * P.stream_reps
      local res = {}
      for _, remote in ipairs { 0, 1 } do
        local prep = k:prepare({ grid = grid, block = STREAM_BLOCK, smem = smem, cluster = cs, stream = stream },
          d_sums, STREAM_WORDS, P.stream_reps, remote)
        d_sums:fill(0, stream) -- on the kernel's stream: a non-blocking stream does not wait for the legacy one
        prep()
        stream:sync { timeout = 30 }
        local h = fetch(d_sums)
        local bad = 0
        for b = 1, grid do
          local rank = (b - 1) % cs
          local src = remote == 1 and (rank + 1) % cs or rank
          if h[b] ~= u32(P.stream_reps * ((src << 16) * STREAM_WORDS + per_pass)) then bad = bad + 1 end
        end
        if bad > 0 then
          all_valid = false
          lab:fail(string.format("dsmem_stream cluster %d remote=%d: %d of %d blocks summed wrong", cs, remote, bad,
            grid))
        end
        res[remote] = measure(prep, stream)
        res[remote].label = remote == 1 and "neighbour (DSM)" or "own (ld.shared)"
      end
      d_sums:free()
      local decision, ratio = lab:compare(res[0], res[1], { margin = 0.02 })
      decisions[#decisions + 1] = decision
      rows[#rows + 1] = { cs, grid, fmt(bytes / (res[0].mean * 1e6)), fmt(bytes / (res[1].mean * 1e6)),
        fmt(1 / ratio, 2), decision }
      lab:record("dsm_bandwidth cluster " .. cs, { grid = grid, bytes = bytes, own_ms = res[0].mean,
        neighbour_ms = res[1].mean, own_bytes_per_ns = bytes / (res[0].mean * 1e6),
        neighbour_bytes_per_ns = bytes / (res[1].mean * 1e6), decision = decision })
    else
      rows[#rows + 1] = { cs, 0, "-", "-", "-", "cannot be resident" }
    end
  end
  stream:free()
  lab:table({ "cluster", "blocks", "own smem (B/ns)", "neighbour's smem (B/ns)", "own / neighbour",
    "own time vs neighbour" }, rows)
  lab:verdict("dsm_bandwidth", "own-buffer time against the neighbour's, per cluster size (a 'faster' row: " ..
    "reading one's own is faster)", judged(all_valid, all_faster(decisions), all_faster(decisions) == nil))
end)

-- ---------------------------------------------------------------------------------------------
part("3. TMA multicast: one load for N CTAs against N loads", { "mc_bytes", "mc_time" }, function()
  local k = mod:kernel("tma_multicast_tiles")
  need(k, "max_active_clusters")
  -- the kernels run on a non-blocking stream, which does not wait for the legacy default stream:
  -- every copy and fill they depend on goes to that stream too
  local stream = cuda.stream { nonblocking = true }
  local h = cuda.host("u32", MAT * MAT)
  h:iota()
  local d = cuda.array("u32", MAT * MAT)
  d:copy_from(h, stream)
  local tm = cuda.tensormap { array = d, dtype = "u32", dims = { MAT, MAT }, box = { BOX, BOX } }
  local tiles_x, ntiles = MAT // BOX, (MAT // BOX) * (MAT // BOX)
  local smem = tm.box_bytes + 128
  local d_status = cuda.array("i32", 4)
  d_status:fill(0, stream)
  -- sum of every value (row * MAT + col) of tile t, mod 2^32
  local function tile_sum(t)
    local x0, y0 = (t % tiles_x) * BOX, (t // tiles_x) * BOX
    return BOX * MAT * (BOX * y0 + BOX * (BOX - 1) // 2) + BOX * (BOX * x0 + BOX * (BOX - 1) // 2)
  end
  local profile_ok, profile_why = type(cuda.profile) == "function", "this gpulab has no cuda.profile"
  if profile_ok and cuda.profile_available then
    local ok, why = cuda.profile_available()
    if not ok then profile_ok, profile_why = false, "CUPTI cannot be used: " .. tostring(why) end
  end
  -- every counter of BYTE_METRICS for one launch: in one profile, or one by one when that fails
  -- (a name this chip does not know), each unknown one then reported as such
  local function read_counters(prep)
    local got = {}
    local ok, prof = pcall(cuda.profile, function() prep() end, { metrics = BYTE_METRICS })
    if ok and prof[1] and prof[1].metrics then
      for _, m in ipairs(BYTE_METRICS) do got[m] = prof[1].metrics[m] end
      return got
    end
    for _, m in ipairs(BYTE_METRICS) do
      local ok1, prof1 = pcall(cuda.profile, function() prep() end, { metrics = { m } })
      if ok1 and prof1[1] and prof1[1].metrics then got[m] = prof1[1].metrics[m]
      else got[m] = "unavailable: " .. first_line(ok1 and "no row for the launch" or prof1) end
    end
    return got
  end
  local rows, byte_rows = {}, {}
  local bytes_ok, bytes_judged, decisions, valid = true, 0, {}, true
  local bytes_seen, bytes_metric = {}, nil
  for _, n in ipairs(MC_SIZES) do
    local nclusters = k:max_active_clusters { block = 256, smem = smem, cluster = n }
    local grid = nclusters * n
    local d_sums = cuda.array("u32", grid)
    local res, counters = {}, {}
    for _, mc in ipairs { 1, 0 } do
      local prep = k:prepare({ grid = grid, block = 256, smem = smem, cluster = n, stream = stream },
        tm, d_sums, ntiles, P.tiles, tiles_x, BOX, BOX, mc, TIMEOUT_NS, d_status)
      d_sums:fill(0, stream)
      prep()
      stream:sync { timeout = 30 }
      local st = fetch(d_status)
      if st[1] ~= 0 then
        valid = false
        lab:fail(string.format("multicast=%d cluster %d: a tile wait timed out (code 0x%x, block %d)", mc, n, st[1],
          st[2]))
        d_status:fill(0, stream)
      end
      local sums, bad = fetch(d_sums), 0
      for b = 1, grid do
        local c, want = (b - 1) // n, 0
        for t = 0, P.tiles - 1 do want = want + tile_sum((c * P.tiles + t) % ntiles) end
        if sums[b] ~= u32(want) then bad = bad + 1 end
      end
      if bad > 0 then
        valid = false
        lab:fail(string.format("multicast=%d cluster %d: %d of %d blocks summed their tiles wrong", mc, n, bad, grid))
      end
      res[mc] = measure(prep, stream)
      res[mc].label = mc == 1 and "multicast" or "each CTA loads"
      if profile_ok then counters[mc] = read_counters(prep) end
    end
    local decision, ratio = lab:compare(res[1], res[0], { margin = 0.02 })
    decisions[#decisions + 1] = decision
    local moved = grid * P.tiles * tm.box_bytes
    rows[#rows + 1] = { n, grid, P.tiles, harness.format_result(res[1], "µs", 1e3),
      harness.format_result(res[0], "µs", 1e3), fmt(ratio, 3), decision, fmt(moved / (res[1].mean * 1e6)) }
    lab:record("multicast " .. n, { grid = grid, multicast_ms = res[1].mean, self_ms = res[0].mean, ratio = ratio,
      decision = decision, counters_multicast = counters[1], counters_self = counters[0] })
    if profile_ok then
      -- what the copies asked for: one box per cluster and tile, or one per CTA and tile
      byte_rows[#byte_rows + 1] = { n, "bytes the TMA copies request", moved // n, moved, fmt(1 / n, 3), fmt(1 / n, 3) }
      local decided = false
      for _, m in ipairs(BYTE_METRICS) do
        local a, b = counters[1][m], counters[0][m]
        if type(a) == "number" and type(b) == "number" then
          byte_rows[#byte_rows + 1] = { n, m, a, b, b > 0 and fmt(a / b, 3) or "-", fmt(1 / n, 3) }
          if not decided and b > 0 then
            decided = true
            bytes_judged = bytes_judged + 1
            if a / b > 1.25 / n then bytes_ok = false end
            bytes_seen[#bytes_seen + 1] = string.format("N=%d: %s (1/N = %s)", n, fmt(a / b, 3), fmt(1 / n, 3))
            bytes_metric = m
          end
        else
          byte_rows[#byte_rows + 1] = { n, m, tostring(a), tostring(b), "-", fmt(1 / n, 3) }
        end
      end
    end
    d_sums:free()
  end
  lab:table({ "N", "blocks", "tiles/cluster", "multicast", "each CTA loads", "time ratio", "multicast is",
    "SMEM fill (B/ns)" }, rows)
  lab:verdict("mc_time", "multicast against each CTA loading the tile, per N (a = multicast)",
    judged(valid, all_faster(decisions), all_faster(decisions) == nil))
  if not profile_ok then
    lab:note("no counters: " .. profile_why)
    lab:verdict("mc_bytes", "not measured: " .. profile_why, nil)
  else
    lab:table({ "N", "counter", "multicast", "each CTA loads", "ratio", "1/N" }, byte_rows)
    lab:note("l1tex__m_xbar2l1tex_read_bytes counts what reaches each SM (the whole tile in every CTA either " ..
      "way); the lts__ counters count what L2 serves")
    lab:verdict("mc_bytes", string.format("multicast / each-CTA-loads %s: %s", tostring(bytes_metric),
      #bytes_seen > 0 and table.concat(bytes_seen, ", ") or "no counter saw traffic"),
      judged(valid and bytes_judged == #MC_SIZES, bytes_ok))
  end
  d_status:free()
  stream:free()
  tm:free()
  d:free()
end)

-- ---------------------------------------------------------------------------------------------
part("4. PDL: a chain of dependent kernels", { "pdl_correct", "pdl_gap", "pdl_time" }, function()
  local k = mod:kernel("pdl_step")
  local K, G, B = P.chain, dev.sm_count, 256
  local n = G * B * 4
  local h = cuda.host("u32", (K + 1) * n)
  h:fill(POISON)
  h:view(1, n):iota()
  local d = cuda.array("u32", (K + 1) * n)
  local d_starts, d_ends = cuda.array("u64", K * G), cuda.array("u64", K * G)
  local d_waited = cuda.array("u64", K * G)
  local stream = cuda.stream { nonblocking = true }

  -- The %globaltimer's tick: gaps are differences of its stamps, so two gaps closer than one tick
  -- cannot be told apart whatever the intervals say.
  local d_tick = cuda.array("u64", 3)
  d_tick:fill(0, stream)
  mod:kernel("globaltimer_tick"):launch({ grid = 1, block = 32, stream = stream }, d_tick, 200000)
  stream:sync { timeout = 30 }
  local ht = fetch(d_tick)
  d_tick:free()
  local tick_ns = ht[2] > 0 and ht[1] or nil
  lab:note(string.format("%%globaltimer: smallest step %s ns (%d steps seen over %.1f µs of reads)",
    tostring(tick_ns), ht[2], ht[3] / 1e3))
  lab:record("globaltimer_tick", { tick_ns = tick_ns, steps = ht[2], span_ns = ht[3] })

  -- The stamped runs are queued whole behind hold_stream, so the stamps show the GPU running the
  -- chain back to back: enqueued as they run, the 1-3 µs links would wait for the host's next launch
  -- (3-4 µs each), and the gaps would be the host's pace. The hold outlasts the enqueueing by far;
  -- a run whose enqueueing took longer than the hold is counted, and makes the gaps unclear.
  local hold = mod:kernel("hold_stream")
  local HOLD_NS = 100000 + K * 20000
  local late_runs = 0
  local function chain(pdl)
    local preps = {}
    for j = 0, K - 1 do
      preps[j + 1] = k:prepare({ grid = G, block = B, pdl = pdl, stream = stream }, d, n, j, d_starts, d_ends,
        d_waited)
    end
    return function() for j = 1, K do preps[j]() end end
  end
  -- per pair (j - 1, j) of every run: start_gaps from the last block end of link j - 1 to the first
  -- block start of link j (before its griddepcontrol.wait), wait_gaps to the first block whose
  -- griddepcontrol.wait returned (from then on link j may read link j - 1's output), in µs
  local out, results, host, all_correct, stamps_ok = {}, {}, {}, true, true
  for _, pdl in ipairs { false, true } do
    local run = chain(pdl)
    local start_gaps, wait_gaps, wrong, bad_stamps = {}, {}, 0, 0
    for _ = 1, P.chain_runs do
      -- on the chain's non-blocking stream, which does not wait for the legacy default stream
      d:copy_from(h, stream)
      d_starts:fill(0, stream)
      d_ends:fill(0, stream)
      d_waited:fill(0, stream)
      hold:launch({ grid = 1, block = 32, stream = stream }, HOLD_NS)
      local t0 = cuda.now()
      run()
      if (cuda.now() - t0) * 1e9 >= HOLD_NS then late_runs = late_runs + 1 end
      stream:sync { timeout = 30 }
      local last = fetch(d, K * n + 1, n)
      for i = 1, n do if last[i] ~= i - 1 + K then wrong = wrong + 1 end end
      local s, e, w = fetch(d_starts), fetch(d_ends), fetch(d_waited)
      local first, final, released = {}, {}, {}
      for j = 0, K - 1 do
        local lo, hi, rel = math.huge, 0, math.huge
        for b = 1, G do
          local i = j * G + b
          if s[i] == 0 or w[i] < s[i] or e[i] < w[i] then bad_stamps = bad_stamps + 1 end
          lo = math.min(lo, s[i])
          hi = math.max(hi, e[i])
          rel = math.min(rel, w[i])
        end
        first[j], final[j], released[j] = lo, hi, rel
      end
      for j = 1, K - 1 do
        start_gaps[#start_gaps + 1] = (first[j] - final[j - 1]) / 1e3
        wait_gaps[#wait_gaps + 1] = (released[j] - final[j - 1]) / 1e3
      end
    end
    if wrong > 0 then
      all_correct = false
      lab:fail(string.format("PDL chain (pdl=%s): %d wrong values after %d links", tostring(pdl), wrong, K))
    end
    if bad_stamps > 0 then
      stamps_ok = false
      lab:fail(string.format("PDL chain (pdl=%s): %d block stamps missing or out of order", tostring(pdl), bad_stamps))
    end
    -- the verdict's time: the GPU's, the whole sample queued first; beside it, the time with the
    -- host enqueueing while the chain runs (what a program that launches the chain as it goes sees)
    results[pdl] = measure_queued(run, stream, K)
    results[pdl].label = pdl and "pdl=true" or "plain"
    host[pdl] = measure(run, stream)
    out[pdl] = { gap = median(start_gaps), wrong = wrong, min_gap = math.min(table.unpack(start_gaps)),
      start_gaps = start_gaps, wait_gaps = wait_gaps, start = rules.interval(start_gaps),
      wait = rules.interval(wait_gaps) }
  end
  local function gap_text(iv)
    if iv == nil then return "-" end
    return string.format("%s [%s, %s], median %s", fmt(iv.mean, 2), fmt(iv.lo, 2), fmt(iv.hi, 2), fmt(iv.median, 2))
  end
  local rows = {}
  for _, pdl in ipairs { false, true } do
    rows[#rows + 1] = { pdl and "pdl=true" or "plain", gap_text(out[pdl].start), gap_text(out[pdl].wait),
      fmt(out[pdl].min_gap, 2), harness.format_result(results[pdl], "µs", 1e3),
      harness.format_result(host[pdl], "µs", 1e3), out[pdl].wrong }
  end
  lab:table({ "launch", "gap end->next start (µs, mean [95% CI])", "gap end->next past griddepcontrol.wait (µs)",
    "smallest start gap (µs)", "chain time (GPU, queued)", "chain time (host enqueueing)", "wrong values" }, rows)
  lab:note("a negative start gap: the next kernel's blocks started (and waited in griddepcontrol.wait) before the " ..
    "previous kernel's last block ended; the gap past griddepcontrol.wait is when the next kernel may read the " ..
    "previous one's output, and decides pdl_gap")
  if late_runs > 0 then
    lab:note(string.format("%d of %d stamped runs took longer to enqueue than the %.0f µs hold: their gaps " ..
      "include the host's pace, so pdl_gap is left unclear", late_runs, 2 * P.chain_runs, HOLD_NS / 1e3))
  end
  local tick_us = tick_ns and tick_ns / 1e3 or nil
  local gap_holds, gap_ev = rules.gap_verdict(out[true].wait_gaps, out[false].wait_gaps, tick_us,
    all_correct and stamps_ok and late_runs == 0)
  if late_runs > 0 and all_correct and stamps_ok then
    gap_ev.reason = string.format("the host's enqueueing outlasted the hold in %d runs", late_runs)
  end
  lab:record("pdl", { chain = K, grid = G, gap_plain_us = out[false].gap, gap_pdl_us = out[true].gap,
    start_gap_plain = out[false].start, start_gap_pdl = out[true].start,
    wait_gap_plain = out[false].wait, wait_gap_pdl = out[true].wait, tick_ns = tick_ns, hold_ns = HOLD_NS,
    late_runs = late_runs,
    gap_decision = gap_holds == true and "smaller" or gap_holds == false and "larger" or "unclear",
    gap_reason = gap_ev.reason,
    plain_ms = results[false].mean, pdl_ms = results[true].mean, measured = "GPU time, each sample queued whole",
    plain_host_ms = host[false].mean, pdl_host_ms = host[true].mean })
  lab:verdict("pdl_correct", string.format("%d links over %d values: %d wrong without PDL, %d with", K, n,
    out[false].wrong, out[true].wrong), all_correct)
  lab:verdict("pdl_gap", string.format("gap end->next past griddepcontrol.wait %s µs with PDL vs %s µs without " ..
    "(%d runs of %d links; %%globaltimer tick %s ns)%s", gap_text(out[true].wait), gap_text(out[false].wait),
    P.chain_runs, K, tostring(tick_ns), gap_ev.reason and ("; unclear: " .. gap_ev.reason) or ""), gap_holds)
  local decision, _, _, detail = lab:compare(results[true], results[false], { margin = 0.01 })
  -- wrong output: unclear; else faster holds, slower or the same refutes (rules.faster_verdict)
  lab:verdict("pdl_time", "the chain's GPU time (each sample queued whole) with PDL against without",
    rules.faster_verdict(all_correct, decision), detail)
  stream:free()
  for _, x in ipairs { d, d_starts, d_ends, d_waited } do x:free() end
end)

-- ---------------------------------------------------------------------------------------------
part("5. Cooperative launch: grid.sync() against kernel boundaries", { "coop_correct", "coop_step", "coop_refused" },
  function()
    local k, k1 = mod:kernel("coop_steps"), mod:kernel("coop_one_step")
    local B, S = 256, P.coop_steps
    local per_sm = k:occupancy(B, 0)
    local G = dev.sm_count
    local n = G * B
    local h = cuda.host("u32", n)
    h:iota()
    local a, b = cuda.array("u32", n), cuda.array("u32", n)
    local stream = cuda.stream { nonblocking = true }
    local coop = k:prepare({ grid = G, block = B, cooperative = true, stream = stream }, a, b, n, S)
    local steps = {}
    for s = 0, S - 1 do
      local src, dst = s % 2 == 0 and a or b, s % 2 == 0 and b or a
      steps[s + 1] = k1:prepare({ grid = G, block = B, stream = stream }, src, dst, n)
    end
    local function multi() for s = 1, S do steps[s]() end end
    local function check(run, label)
      -- on the kernels' non-blocking stream, which does not wait for the legacy default stream
      a:copy_from(h, stream)
      b:fill(POISON, stream)
      run()
      stream:sync { timeout = 30 }
      local r, wrong = fetch(S % 2 == 1 and b or a), 0
      for i = 1, n do if r[i] ~= (i - 1 + S) % n + S then wrong = wrong + 1 end end
      if wrong > 0 then lab:fail(string.format("%s: %d of %d values wrong after %d steps", label, wrong, n, S)) end
      return wrong
    end
    local wrong_coop, wrong_multi = check(coop, "cooperative"), check(multi, "one launch per step")
    -- the verdict's times: the GPU's, each sample queued whole before it starts (one launch per
    -- step takes a few µs, so with the host enqueueing as it runs the samples would time the
    -- host's launch path); the host-enqueued time of the launches beside it
    local rc, rm = measure_queued(coop, stream, 1), measure_queued(multi, stream, S)
    rc.label, rm.label = "grid.sync()", "one launch per step"
    local rm_host = measure(multi, stream)
    lab:table({ "form", "launches", "per step (µs)", "whole run (GPU, queued)", "whole run (host enqueueing)" }, {
      { "cooperative, grid.sync()", 1, fmt(rc.mean * 1e3 / S, 3), harness.format_result(rc, "µs", 1e3), "-" },
      { "one launch per step", S, fmt(rm.mean * 1e3 / S, 3), harness.format_result(rm, "µs", 1e3),
        harness.format_result(rm_host, "µs", 1e3) } })
    lab:record("cooperative", { steps = S, grid = G, coop_ms = rc.mean, multi_ms = rm.mean,
      measured = "GPU time, each sample queued whole", multi_host_ms = rm_host.mean })
    local correct = wrong_coop == 0 and wrong_multi == 0
    lab:verdict("coop_correct", string.format("%d steps over %d values: %d wrong (grid.sync), %d wrong (launches)", S,
      n, wrong_coop, wrong_multi), correct)
    local decision, _, _, detail = lab:compare(rc, rm, { margin = 0.02 })
    lab:verdict("coop_step", "per-step time of grid.sync() against a kernel boundary",
      rules.faster_verdict(correct, decision), detail)

    -- one block more than can be co-resident: gpulab must refuse it itself
    local over = per_sm * dev.sm_count + 1
    local ok, err = pcall(k.launch, k, { grid = over, block = B, cooperative = true, stream = stream }, a, b, n, S)
    local msg = tostring(err)
    local from_driver = not ok and cuda.is_error ~= nil and cuda.is_error(err)
    local function names(v) return msg:find("%f[%d]" .. v .. "%f[%D]") ~= nil end
    lab:note(string.format("grid of %d blocks (%d per SM x %d SMs + 1): %s", over, per_sm, dev.sm_count,
      ok and "launched" or first_line(msg)))
    if ok then stream:sync { timeout = 30 } end
    lab:verdict("coop_refused", string.format("%s; %s; names %d per SM: %s, %d SMs: %s", ok and "launched" or "refused",
      from_driver and "a cuda.error from the driver" or "a gpulab error", per_sm, tostring(names(per_sm)),
      dev.sm_count, tostring(names(dev.sm_count))),
      not ok and not from_driver and names(per_sm) and names(dev.sm_count))
    stream:free()
    a:free()
    b:free()
  end)

os.exit(lab:finish())

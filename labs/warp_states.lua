-- warp_states.lua — seed §2: active is not issuing.
--
-- Claims: a scheduler issues from eligible warps, a subset of its active warps; high occupancy
-- does not guarantee enough eligible warps, so look at issue slots, not only at occupancy.
-- Setup: kernels whose threads run dependent chains (FMA: ~4 cycles per link; loads through
-- a permutation held in L2: hundreds of cycles per link). Occupancy is set with dynamic shared
-- memory (the kernel does not use it); ILP = independent chains per thread at equal work per
-- thread. Active, eligible and issued warps per scheduler per cycle come from the GPU's counters
-- read in-process (cuda.profile, CUPTI's range profiler: one profiled launch per configuration);
-- --ncu re-runs each configuration in a child under Nsight Compute as a cross-check.
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "warp_states",
  title = "Warp states: occupancy, eligible warps and issue slots",
  claims = "seed §2",
  params = {
    { name = "block", default = 128, min = 32, max = 1024, help = "threads per block (a multiple of 32)" },
    { name = "ncu", default = false, help = "also re-run each configuration under ncu (cross-check of the counters)" },
    { name = "cupti", default = true, help = "read active/eligible/issued in-process through cuda.profile (CUPTI)" },
    { name = "config", default = "", help = "run one configuration KIND:ILP:BLOCKS_PER_SM once (used under ncu)" },
    { name = "reps", default = 15, min = 1, max = 1000, help = "timed repetitions per configuration" },
    { name = "pcsample", default = true, help = "locate the stalls per source line with cuda.pcsample (CUPTI)" },
  },
}
local P = lab.params
lab:claim { id = "stall_lines", seed = "§2", text =
  "the issue-slot holes sit where the chains put them: at one warp per scheduler, CUPTI's PC samples give the " ..
  "load chain's load line long_scoreboard as its top stall reason and the FMA chain's FMA line wait " ..
  "(per-line samples, not kernel averages)" }
if P.block % 32 ~= 0 then
  io.stderr:write("warp_states: --block must be a multiple of 32\n")
  os.exit(2)
end

local KINDS = { "fma", "load" }
local ILPS = { 1, 4 }
local BLOCKS_PER_SM = lab.quick and { 1, 4, 16 } or { 1, 2, 4, 8, 16 }
-- links per thread: long enough that one launch is >= ~0.1 ms even when fully hidden
local STEPS = { fma = lab.quick and 65536 or 262144, load = lab.quick and 1024 or 4096 }
local CHAIN_ENTRIES = 1 << 20 -- 4 MiB permutation: stays in L2, so a link costs an L2 hit

local function kernel_name(kind, ilp) return string.format("%s_chain<%d>", kind, ilp) end

-- ---------------------------------------------------------------------------------------------
lab:section("Setup")
local names = {}
for _, kind in ipairs(KINDS) do for _, ilp in ipairs(ILPS) do names[#names + 1] = kernel_name(kind, ilp) end end
local t = cuda.now()
local prog = cuda.compile_file(cuda.home .. "/kernels/warp_states.cu",
  { arch = "sm_90a", std = "c++17", names = names })
lab:note(string.format("kernels/warp_states.cu compiled for sm_90a in %.1f ms: %s", (cuda.now() - t) * 1e3,
  table.concat(names, ", ")))
lab:note(string.format("each thread does %d FMA links or %d load links in all, split over ILP independent chains",
  STEPS.fma, STEPS.load))
lab:require_gpu()

local dev = cuda.device(0)
local mod = cuda.load(prog)
local kernels = {}
for _, n in ipairs(names) do
  kernels[n] = mod:kernel(n)
  kernels[n]:set_max_dynamic_smem(dev.smem_per_block_optin)
end

-- The smallest dynamic smem that caps the kernel at `target` blocks per SM (occupancy falls as
-- smem grows), or nil when no amount gives exactly that many.
local function smem_for(k, target)
  if k:occupancy(P.block, 0) <= target then
    return k:occupancy(P.block, 0) == target and 0 or nil
  end
  local lo, hi = 0, dev.smem_per_block_optin -- occ(lo) > target
  if k:occupancy(P.block, hi) > target then return nil end
  while hi - lo > 128 do
    local mid = (lo + hi) // 2
    if k:occupancy(P.block, mid) > target then lo = mid else hi = mid end
  end
  return k:occupancy(P.block, hi) == target and hi or nil
end

-- A single-cycle random permutation (Sattolo), so every chain visits the whole table.
local function permutation(n, seed)
  local h = cuda.host("u32", n)
  for i = 1, n do h[i] = i - 1 end
  local state = seed
  for i = n, 2, -1 do
    state = (state * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
    local j = (state >> 20) % (i - 1) + 1 -- 1..i-1
    h[i], h[j] = h[j], h[i]
  end
  local d = cuda.array("u32", n)
  d:copy_from(h)
  return d, h
end
local chain, chain_h = permutation(CHAIN_ENTRIES, 12345)

-- What a thread must have computed, worked out on the CPU: timings of wrong work prove nothing.
local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end
local expected_cache = {}
local function expected(kind, ilp, tid, thread_in_block)
  local key = string.format("%s:%d:%d:%d", kind, ilp, tid, thread_in_block)
  if expected_cache[key] then return expected_cache[key] end
  local steps = STEPS[kind] // ilp
  local v
  if kind == "fma" then
    local a, b, sum = f32(0.999999), f32(1e-6), 0.0
    for c = 0, ilp - 1 do
      local acc = f32(thread_in_block + c)
      for _ = 1, steps do acc = f32(acc * a + b) end
      sum = f32(sum + acc)
    end
    v = sum
  else
    v = 0
    for c = 0, ilp - 1 do
      local idx = ((tid * 7919 + c * 104729) & 0xffffffff) % CHAIN_ENTRIES
      for _ = 1, steps do idx = chain_h[idx + 1] end
      v = v ~ idx
    end
  end
  expected_cache[key] = v
  return v
end

-- Checks the first and the last thread of a configuration's output.
local function check_output(kind, ilp, c)
  local h = cuda.host(c.out.dtype, c.out.numel)
  h:copy_from(c.out)
  for _, tid in ipairs { 0, c.out.numel - 1 } do
    local want, got = expected(kind, ilp, tid, tid % P.block), h[tid + 1]
    local ok = kind == "fma" and math.abs(got - want) <= 1e-4 * math.abs(want) or got == want
    if not ok then
      lab:fail(string.format("%s ILP %d: thread %d computed %s, the CPU says %s", kind, ilp, tid, got, want))
    end
  end
end

-- Prepares one configuration; returns a function that launches it once, or nil and why.
local function setup(kind, ilp, per_sm)
  local k = kernels[kernel_name(kind, ilp)]
  local smem = smem_for(k, per_sm)
  if not smem then return nil, "no shared-memory size gives " .. per_sm .. " blocks/SM" end
  local grid = per_sm * dev.sm_count -- exactly one wave: every block resident from the start
  local out = cuda.array(kind == "fma" and "f32" or "u32", grid * P.block)
  local steps = STEPS[kind] // ilp
  local cfg = { grid = grid, block = P.block, smem = smem }
  local run
  if kind == "fma" then
    run = function() k:launch(cfg, out, steps) end
  else
    run = function() k:launch(cfg, chain, CHAIN_ENTRIES, out, steps) end
  end
  return {
    run = run, smem = smem, grid = grid, out = out,
    links = grid * P.block * STEPS[kind], warps_per_sm = per_sm * P.block // 32,
  }
end

local function parse_config(text)
  local kind, ilp, per_sm = text:match("^(%a+):(%d+):(%d+)$")
  ilp, per_sm = tonumber(ilp), tonumber(per_sm)
  if not kind or not kernels[kernel_name(kind, ilp or 0)] or not per_sm or per_sm < 1 then
    io.stderr:write("warp_states: --config expects KIND:ILP:BLOCKS_PER_SM with KIND fma|load and ILP 1|4, got '"
      .. text .. "'\n")
    os.exit(2)
  end
  return kind, ilp, per_sm
end

-- ---------------------------------------------------------------------------------------------
-- Single-configuration mode: one launch (what a profiler run measures), then stop.
if P.config ~= "" then
  local kind, ilp, per_sm = parse_config(P.config)
  local c, why = setup(kind, ilp, per_sm)
  if not c then
    io.stderr:write("warp_states: " .. why .. "\n")
    os.exit(1)
  end
  c.run()
  cuda.sync { timeout = 60 }
  lab:note(string.format("ran %s once: grid=%d block=%d smem=%d", P.config, c.grid, P.block, c.smem))
  os.exit(lab:finish())
end

-- ---------------------------------------------------------------------------------------------
lab:section("Measurement: throughput of dependent chains against occupancy")
local results, rows = {}, {}
local total, done = #KINDS * #ILPS * #BLOCKS_PER_SM, 0
for _, kind in ipairs(KINDS) do
  for _, ilp in ipairs(ILPS) do
    for _, per_sm in ipairs(BLOCKS_PER_SM) do
      done = done + 1
      lab:progress(done, total, "configurations")
      local c, why = setup(kind, ilp, per_sm)
      if not c then
        lab:note(string.format("%s ILP=%d at %d blocks/SM skipped: %s", kind, ilp, per_sm, why))
      else
        local b = cuda.bench(c.run, { warmup = 2, reps = lab.quick and math.min(P.reps, 5) or P.reps })
        local r = {
          kind = kind, ilp = ilp, per_sm = per_sm, warps = c.warps_per_sm, smem = c.smem, ms = b.median,
          spread = (b.max - b.min) / b.median, glinks = c.links / (b.median * 1e6),
          config = string.format("%s:%d:%d", kind, ilp, per_sm),
        }
        results[#results + 1] = r
        check_output(kind, ilp, c)
        c.out:free()
      end
    end
  end
end

local function find(kind, ilp, warps)
  for _, r in ipairs(results) do
    if r.kind == kind and r.ilp == ilp and r.warps == warps then return r end
  end
end

-- ---------------------------------------------------------------------------------------------
-- Scheduler counters, per scheduler (SMSP) per cycle it was active: warps resident, warps ready
-- to issue, instructions issued (one issue slot per cycle, so `issued` is the slot utilisation).
local METRICS = {
  active = "smsp__warps_active.avg.per_cycle_active",
  eligible = "smsp__warps_eligible.avg.per_cycle_active",
  issued = "smsp__issue_active.avg.per_cycle_active",
}
local METRIC_LIST = { METRICS.active, METRICS.eligible, METRICS.issued }

-- In-process: each configuration launched once inside cuda.profile (CUPTI kernel replay gives
-- that launch its own range). Returns true, or nil and CUPTI's own message.
local function counters_in_process()
  local ok, why = cuda.profile_available()
  if not ok then return nil, why end
  local outer = true -- an outer range around the launch, unless this CUPTI makes it a row
  for i, r in ipairs(results) do
    lab:progress(i, #results, "CUPTI")
    local c = assert(setup(r.kind, r.ilp, r.per_sm))
    local fine, prof = pcall(cuda.profile, c.run, { metrics = METRIC_LIST, outer_range = outer })
    if fine and #prof ~= 1 and outer then
      outer = false
      fine, prof = pcall(cuda.profile, c.run, { metrics = METRIC_LIST, outer_range = false })
    end
    c.out:free()
    if not fine then return nil, tostring(prof) end
    if #prof ~= 1 then return nil, string.format("%s: %d counter ranges for one launch", r.config, #prof) end
    local m = prof[1].metrics
    r.active, r.eligible, r.issued = m[METRICS.active], m[METRICS.eligible], m[METRICS.issued]
    r.passes, r.source = prof[1].passes, "CUPTI"
  end
  return true
end

-- ---------------------------------------------------------------------------------------------
-- Where the holes are, from samples: both chains at ILP 1, one block of P.block threads per SM
-- (one warp per scheduler at the default 128), compiled again with line info, under
-- cuda.pcsample. Each source line is found by its text in the .cu file, not by number.
local stall_lines
local function line_with(text, needle)
  local n = 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if l:find(needle, 1, true) then return n end
  end
end
local function top_reason(stalls)
  local best, name = -1, nil
  for k, c in pairs(stalls or {}) do if c > best or (c == best and k < name) then best, name = c, k end end
  return name, best
end
if P.pcsample and type(cuda.pcsample) == "function" then
  lab:section("Measurement: where each chain stalls (cuda.pcsample, per source line)")
  local ok, why = cuda.pcsample_available()
  if not ok then
    stall_lines = { why = "cuda.pcsample is not available: " .. tostring(why) }
  else
    local path = cuda.home .. "/kernels/warp_states.cu"
    local f = assert(io.open(path, "r"))
    local text = f:read("a")
    f:close()
    local lines = { load = line_with(text, "idx[c] = __ldcg(next + idx[c]);"),
                    fma = line_with(text, "acc[c] = fmaf(acc[c], a, b);") }
    local lprog = cuda.compile_file(path, { arch = "sm_90a", std = "c++17", lineinfo = true,
      names = { kernel_name("fma", 1), kernel_name("load", 1) } })
    local lmod = cuda.load(lprog)
    local grid, cfg_steps = dev.sm_count, { fma = STEPS.fma, load = STEPS.load }
    local outs = { fma = cuda.array("f32", grid * P.block), load = cuda.array("u32", grid * P.block) }
    local lk = { fma = lmod:kernel(kernel_name("fma", 1)), load = lmod:kernel(kernel_name("load", 1)) }
    local function both()
      lk.fma:launch({ grid = grid, block = P.block }, outs.fma, cfg_steps.fma)
      lk.load:launch({ grid = grid, block = P.block }, chain, CHAIN_ENTRIES, outs.load, cfg_steps.load)
    end
    both()
    cuda.sync { timeout = 60 }
    local sok, r = pcall(cuda.pcsample, both, { programs = lprog })
    if not sok then
      stall_lines = { why = "cuda.pcsample failed: " .. tostring(r) }
    else
      local seen = {}
      for _, x in ipairs(r) do seen[#seen + 1] = string.format("%s (%d samples)", x.kernel, x.samples) end
      stall_lines = { rows = {}, seen = string.format("rows: %s; %d samples in all, %d records",
        #seen > 0 and table.concat(seen, ", ") or "none", r.total_samples or 0, r.records or 0) }
      local tbl = {}
      for _, kind in ipairs(KINDS) do
        local row
        for _, x in ipairs(r) do if x.kernel:find(kind .. "_chain", 1, true) then row = x end end
        local found
        for _, l in ipairs(row and row.lines or {}) do
          if l.line == lines[kind] and l.file:find("warp_states.cu", 1, true) then found = l end
        end
        local name, n = top_reason(found and found.stalls)
        stall_lines.rows[kind] = { line = lines[kind], samples = found and found.samples or 0,
          kernel_samples = row and row.samples or 0, top = name, top_samples = n,
          lines_missing = row and row.lines_missing }
        tbl[#tbl + 1] = { kind .. " chain", tostring(lines[kind]), tostring(row and row.samples or 0),
          tostring(found and found.samples or 0), name or "-",
          found and string.format("%.0f%%", 100 * n / math.max(found.samples, 1)) or "-" }
        if row then lab:note(r:annotate(row.kernel)) end
      end
      lab:table({ "kernel", "line", "kernel samples", "line samples", "top stall reason", "share of the line" }, tbl)
      lab:record("stall_lines", stall_lines.rows)
    end
  end
end

local cupti_why
if P.cupti and os.getenv("GPULAB_SANITIZER") then
  -- a sanitizer instruments the process through the same tools interface: no counters under it
  cupti_why = "not read under compute-sanitizer (" .. os.getenv("GPULAB_SANITIZER") .. ")"
  lab:note("in-process counters: " .. cupti_why)
elseif P.cupti then
  lab:section("Measurement: scheduler counters in-process (cuda.profile, CUPTI range profiler)")
  local ok, why = counters_in_process()
  if ok then
    lab:note(string.format("one profiled launch per configuration; %d replay pass(es) each; clocks as they run "
      .. "(no clock control)", results[1] and results[1].passes or 0))
  else
    cupti_why = why
    for _, r in ipairs(results) do r.active, r.eligible, r.issued, r.source = nil, nil, nil, nil end
    lab:note("in-process counters unavailable: " .. tostring(why))
  end
end

-- Under ncu: one child gpulab per configuration, profiled once, counters read from CSV.
local function find_ncu()
  for _, p in ipairs { "ncu", "/usr/local/cuda/bin/ncu" } do
    if os.execute("command -v " .. p .. " >/dev/null 2>&1") then return p end
  end
end

local function gpulab_exe()
  local i = 0
  while arg[i - 1] do i = i - 1 end
  return arg[i]
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function profile(ncu, r)
  local cmd = table.concat({
    "timeout 300", ncu, "--clock-control none", "--csv", "--kernel-name regex:chain",
    "--metrics", METRICS.active .. "," .. METRICS.eligible .. "," .. METRICS.issued,
    shell_quote(gpulab_exe()), shell_quote(arg[0]), "--config=" .. r.config, lab.quick and "--quick" or "", "2>&1",
  }, " ")
  local p = io.popen(cmd)
  local text = p:read("a")
  p:close()
  local got = {}
  for line in text:gmatch("[^\n]+") do
    for key, metric in pairs(METRICS) do
      if line:find('"' .. metric .. '"', 1, true) then
        local value = line:match('"([^"]*)"%s*$')
        got[key] = value and tonumber((value:gsub(",", "")))
      end
    end
  end
  if not (got.active and got.eligible and got.issued) then
    return nil, (text:match("==ERROR==[^\n]*") or text:sub(-300))
  end
  return got
end

local ncu_path = P.ncu and find_ncu()
if P.ncu and not ncu_path then lab:note("--ncu: ncu not found on PATH or in /usr/local/cuda/bin; counters skipped") end
if ncu_path then
  lab:section("Measurement: scheduler counters under ncu --clock-control none")
  for i, r in ipairs(results) do
    lab:progress(i, #results, "ncu")
    local got, why = profile(ncu_path, r)
    if got then
      r.ncu = got
      if not r.source then r.active, r.eligible, r.issued, r.source = got.active, got.eligible, got.issued, "ncu" end
    else
      lab:note("ncu " .. r.config .. ": " .. tostring(why))
    end
  end
end

local function opt(v, fmt) return v and string.format(fmt, v) or "-" end
-- the cross-check: ncu's eligible and issued beside the in-process ones, when both were read
local cross = false
for _, r in ipairs(results) do if r.ncu and r.source == "CUPTI" then cross = true end end
for _, r in ipairs(results) do
  local row = { r.kind, r.ilp, r.per_sm, r.warps, r.smem, string.format("%.3f", r.ms),
    string.format("%.1f", r.glinks), string.format("%.0f%%", r.spread * 100),
    opt(r.active, "%.2f"), opt(r.eligible, "%.2f"), opt(r.issued, "%.2f"),
    opt(r.issued and r.issued * 100, "%.0f%%"), r.source or "-" }
  if cross then
    row[#row + 1] = r.ncu and string.format("%.2f / %.2f / %.2f", r.ncu.active, r.ncu.eligible, r.ncu.issued) or "-"
  end
  rows[#rows + 1] = row
end
local header = { "chain", "ILP", "blocks/SM", "warps/SM", "dyn smem (B)", "median ms", "G links/s", "spread",
  "active/sched", "eligible/sched", "issued/sched", "issue slots used", "counters" }
if cross then header[#header + 1] = "ncu active / eligible / issued" end
lab:table(header, rows)
lab:record("configurations", results)

-- ---------------------------------------------------------------------------------------------
lab:section("Verdicts")
local max_warps = 0
for _, r in ipairs(results) do max_warps = math.max(max_warps, r.warps) end
local fma_lo, fma_hi = find("fma", 1, P.block // 32), find("fma", 1, max_warps)
if fma_lo and fma_hi then
  lab:verdict("more resident warps hide a dependent chain's latency (up to the issue limit)",
    string.format("FMA chain, ILP 1: %.1f G links/s at %d warps/SM, %.1f at %d warps/SM", fma_lo.glinks,
      fma_lo.warps, fma_hi.glinks, fma_hi.warps),
    fma_hi.glinks > 2 * fma_lo.glinks)
end
local ld1_hi, ld4_hi = find("load", 1, max_warps), find("load", 4, max_warps)
if ld1_hi and ld4_hi then
  -- Evidence for the claim: at full occupancy either independent work per warp still speeds
  -- things up (the warps were not eligible often enough), or the counters show few eligible
  -- warps among many active ones. Neither seen is no evidence against it (memory may be the
  -- limit), so that case stays unclear.
  -- With counters the claim is decided from them: at high occupancy (at least half the warps a
  -- scheduler can hold are active) the issue slot is idle more than half the cycles, i.e. on
  -- most cycles no warp was eligible. Without counters only the throughput evidence is left.
  local faster = ld4_hi.glinks > 1.5 * ld1_hi.glinks
  local holds, counters
  if ld1_hi.eligible then
    local high = ld1_hi.active >= 0.5 * (max_warps / 4)
    if high then holds = ld1_hi.issued < 0.5 end
    counters = string.format("; %s: %.2f active, %.2f eligible, %.2f issued per scheduler per cycle "
      .. "(issue slots %.0f%% used)%s", ld1_hi.source, ld1_hi.active, ld1_hi.eligible, ld1_hi.issued,
      ld1_hi.issued * 100, high and "" or "; occupancy was not high, so the claim was not tested")
  else
    holds = faster or nil
    counters = "; no counters: " .. (cupti_why and ("CUPTI: " .. cupti_why) or "in-process counters off")
      .. (P.ncu and (ncu_path and "; ncu gave none" or "; ncu not found") or "; ncu not asked for (--ncu)")
  end
  local claim = "high occupancy does not guarantee enough eligible warps"
  if lab.claim then
    lab:claim { id = "eligible", seed = "§2", text = claim }
    claim = "eligible"
  end
  lab:verdict(claim,
    string.format("load chain at %d warps/SM (full): ILP 1 %.1f G links/s, ILP 4 %.1f G links/s (%.1fx)%s",
      max_warps, ld1_hi.glinks, ld4_hi.glinks, ld4_hi.glinks / ld1_hi.glinks, counters),
    holds)
end
if stall_lines and stall_lines.rows then
  local ld, fm = stall_lines.rows.load, stall_lines.rows.fma
  local holds
  if ld.top and fm.top and ld.samples >= 100 and fm.samples >= 100 then
    holds = ld.top:find("long_scoreboard", 1, true) ~= nil and fm.top:find("wait", 1, true) ~= nil
  end
  lab:verdict("stall_lines", string.format(
    "load line %d: %d samples, top %s (%d); FMA line %d: %d samples, top %s (%d)", ld.line, ld.samples,
    tostring(ld.top), ld.top_samples or 0, fm.line, fm.samples, tostring(fm.top), fm.top_samples or 0)
    .. ((ld.samples == 0 or fm.samples == 0) and "; " .. stall_lines.seen or "")
    .. ((ld.lines_missing or fm.lines_missing) and "; no source lines: "
      .. tostring(ld.lines_missing or fm.lines_missing) or ""), holds)
elseif P.pcsample then
  lab:verdict("stall_lines", (stall_lines and stall_lines.why) or "this gpulab has no cuda.pcsample", nil)
end
-- the same work with independent instructions at a quarter of the warps
for _, kind in ipairs(KINDS) do
  local full, quarter = find(kind, 1, max_warps), find(kind, 4, max_warps // 4)
  if full and quarter then
    lab:verdict(string.format("%s chain: ILP at lower occupancy can match high occupancy", kind),
      string.format("ILP 4 at %d warps/SM: %.1f G links/s; ILP 1 at %d warps/SM: %.1f G links/s", quarter.warps,
        quarter.glinks, full.warps, full.glinks),
      quarter.glinks >= 0.9 * full.glinks)
  end
end
local counted = false
for _, r in ipairs(results) do
  if r.eligible then
    counted = true
    if r.issued > r.eligible + 0.05 or r.eligible > r.active + 0.05 then
      lab:fail(string.format("%s: issued %.2f > eligible %.2f or eligible > active %.2f", r.config, r.issued,
        r.eligible, r.active))
    end
  end
end
if counted then
  local worst
  for _, r in ipairs(results) do
    if r.eligible and r.warps == max_warps and (not worst or r.eligible < worst.eligible) then worst = r end
  end
  if worst then
    lab:verdict("active warps are not eligible warps",
      string.format("%s at full occupancy: %.2f active, %.2f eligible, %.2f issued per scheduler per cycle",
        worst.config, worst.active, worst.eligible, worst.issued),
      worst.eligible < 0.5 * worst.active)
  end
else
  lab:note("no active/eligible/issued counts: neither CUPTI (" .. tostring(cupti_why or "turned off with --cupti=false")
    .. ") nor ncu (" .. (P.ncu and "not found or failed" or "not asked for; --ncu") .. ") gave them; "
    .. "the throughput verdicts above stand without them")
end

-- ---------------------------------------------------------------------------------------------
lab:section("Picture")
local series = {}
for _, kind in ipairs(KINDS) do
  for _, ilp in ipairs(ILPS) do
    local pts = {}
    for _, r in ipairs(results) do if r.kind == kind and r.ilp == ilp then pts[#pts + 1] = { r.warps, r.glinks } end end
    if #pts > 0 then series[#series + 1] = { name = string.format("%s ILP %d", kind, ilp), points = pts } end
  end
end
lab:svg_lines { file = "warp_states.svg", title = "Dependent chains: throughput against resident warps",
  x_label = "warps per SM", y_label = "G links/s", series = series }
local eligible_series, issued_series = {}, {}
for _, kind in ipairs(KINDS) do
  for _, ilp in ipairs(ILPS) do
    local e, i = {}, {}
    for _, r in ipairs(results) do
      if r.kind == kind and r.ilp == ilp and r.eligible then
        e[#e + 1] = { r.warps, r.eligible }
        i[#i + 1] = { r.warps, r.issued * 100 }
      end
    end
    local name = string.format("%s ILP %d", kind, ilp)
    if #e > 0 then
      eligible_series[#eligible_series + 1] = { name = name, points = e }
      issued_series[#issued_series + 1] = { name = name, points = i }
    end
  end
end
if #eligible_series > 0 then
  lab:svg_lines { file = "warp_states_eligible.svg", title = "Eligible warps per scheduler against resident warps",
    x_label = "warps per SM", y_label = "eligible warps per scheduler per cycle", series = eligible_series }
  lab:svg_lines { file = "warp_states_issue.svg", title = "Issue-slot utilisation against resident warps",
    x_label = "warps per SM", y_label = "issue slots used (%)", series = issued_series }
end

chain:free()
os.exit(lab:finish())

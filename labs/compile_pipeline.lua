-- compile_pipeline.lua — seed §4: lowering in stages, and semantics vs execution layout.
--
-- Claims: CUDA C++ -> NVRTC -> PTX -> ptxas -> cubin -> SASS -> module load -> launch, each stage
-- adding hardware decisions (virtual registers, then real registers, then instructions); one
-- 1024-element tile mapped to 1, 2, 4 or 8 warps computes the same sum with different
-- elements per thread, registers and time, which does not make more warps faster; a register
-- cap forces values out to local memory (spills), visible in the kernel's local bytes.
local harness = require("gpulab.lab")

local lab = harness.new {
  name = "compile_pipeline",
  title = "Compile pipeline: source, PTX, cubin, SASS; one tile, four layouts",
  claims = "seed §4",
  params = {
    { name = "tiles", default = 65536, quick = 16384, min = 1, max = 1 << 20,
      help = "1024-element tiles reduced per launch" },
    { name = "reg_cap", default = 32, min = 16, max = 255, help = "register cap for the spill demonstration" },
    { name = "reps", default = 20, quick = 10, min = 3, max = 1000, help = "samples per kernel, at least" },
  },
}
local P = lab.params
lab:claim { id = "same_sum", seed = "§4", text = "one 1024-element logical tile mapped to different warp counts: " ..
  "the math is the same (the same tile sum under every layout)" }
lab:claim { id = "layout_changes", seed = "§4", text = "the layout changes elements per thread and registers" }
lab:claim { id = "data_exchange", seed = "§4", text = "reductions and data exchange change with the layout: in " ..
  "machine code one warp needs no barrier or shared memory, more warps do" }
lab:claim { id = "more_warps", seed = "§4", text = "that does not prove that more warps is faster: more warps per " ..
  "tile is not automatically faster" }
lab:claim { id = "spills", own = true, text = "a register cap below what the kernel needs spills live values to " ..
  "local memory" }

local SRC = cuda.home .. "/kernels/tile_reduce.cu"
local WARPS = { 1, 2, 4, 8 }
local TILE = 1024
local names = {}
for i, w in ipairs(WARPS) do names[i] = string.format("tile_reduce<%d>", w) end

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local shell_quote, find_tool = harness.shell_quote, harness.find_tool

-- Runs a tool on `data` written to a temporary file; returns its output or nil, why.
local function run_on_temp(data, suffix, make_cmd)
  local path = os.tmpname() .. suffix
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
  local p = io.popen(make_cmd(shell_quote(path)) .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  os.remove(path)
  if not ok then return nil, out end
  return out
end

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- Sum of the N in PTX declarations like `.reg .f32 %f<514>;`
local function ptx_virtual_registers(ptx, entry_name)
  local body = ptx:match("%.entry%s+" .. entry_name:gsub("%p", "%%%0") .. "%s*(%b().-%b{})")
  if not body then return nil end
  local n = 0
  for k in body:gmatch("%.reg%s+%.%w+%s+%%%w+<(%d+)>") do n = n + tonumber(k) end
  return n
end

-- ---------------------------------------------------------------------------------------------
lab:section("Stage 1-3: source -> PTX -> cubin (NVRTC, compile cache off)")
local src = read_file(SRC)
local t = cuda.now()
local virt = cuda.compile(src, { name = "tile_reduce.cu", arch = "compute_90a", std = "c++17", names = names,
  cache = false })
local ptx_ms = (cuda.now() - t) * 1e3
t = cuda.now()
local prog = cuda.compile(src, { name = "tile_reduce.cu", arch = "sm_90a", std = "c++17", names = names,
  cache = false })
local cubin_ms = (cuda.now() - t) * 1e3
local ptx = prog.ptx
lab:table({ "stage", "artifact", "size", "time", "what it adds" }, {
  { "CUDA C++", "tile_reduce.cu", #src .. " B", "-", "one template, semantics only" },
  { "NVRTC front end", "PTX (compute_90a)", #virt.ptx .. " B", string.format("%.1f ms", ptx_ms),
    string.format("%d entries, mangled names, unlimited virtual registers", count(virt.ptx, "%.entry")) },
  { "+ ptxas", "cubin (sm_90a)", #prog.cubin .. " B", string.format("%.1f ms", cubin_ms),
    "front end again, then real registers, spills, scheduling, ELF with launch metadata" },
})
for _, n in ipairs(names) do
  lab:note(string.format("%s lowers to %s (%s virtual registers in PTX)", n, prog.lowered[n],
    tostring(ptx_virtual_registers(ptx, prog.lowered[n]))))
end
lab:record("stages", { source_bytes = #src, ptx_bytes = #virt.ptx, cubin_bytes = #prog.cubin, ptx_ms = ptx_ms,
  cubin_ms = cubin_ms })

-- ptxas -v reports real registers and spills without a GPU (when the toolkit is installed)
local ptxas = find_tool("ptxas")
local function ptxas_report(options)
  if not ptxas then return nil end
  local out = run_on_temp(ptx, ".ptx", function(path)
    return shell_quote(ptxas) .. " -arch=sm_90a -v " .. (options or "") .. " " .. path .. " -o /dev/null"
  end)
  if not out then return nil end
  local report = {}
  for entry, props in out:gmatch("Compiling entry function '([^']+)'.-(Used %d+ registers)") do
    report[entry] = { regs = tonumber(props:match("%d+")) }
  end
  local props = "Function properties for ([%w_]+)%s+(%d+) bytes stack frame, (%d+) bytes spill stores"
  for entry, stack, spill in out:gmatch(props) do
    report[entry] = report[entry] or {}
    report[entry].stack, report[entry].spill_stores = tonumber(stack), tonumber(spill)
  end
  return report
end
local ptxas_default = ptxas_report()
if ptxas_default then
  local rows = {}
  for _, n in ipairs(names) do
    local r = ptxas_default[prog.lowered[n]] or {}
    rows[#rows + 1] = { n, r.regs or "?", r.stack or "?", r.spill_stores or "?" }
  end
  lab:table({ "kernel", "ptxas: registers", "stack frame (B)", "spill stores (B)" }, rows)
else
  lab:note("ptxas not found: real register counts come from the loaded kernels below")
end

lab:section("Stage 4: cubin -> SASS")
-- prog:sass runs the toolkit's nvdisasm and parses it; without one it raises naming what to install
local sass_ok, first_sass = pcall(prog.sass, prog, names[1], { lineinfo = false })
local sass_functions
if sass_ok then
  sass_functions = { [names[1]] = first_sass }
  for i = 2, #names do sass_functions[names[i]] = prog:sass(names[i], { lineinfo = false }) end
  local rows, per_kernel = {}, {}
  for i, n in ipairs(names) do
    local list = sass_functions[n]
    local k = list:count { "LDG", "SHFL", "BAR", "LDS", "STS" }
    local c = { total = #list, ldg = k.LDG, shfl = k.SHFL, bar = k.BAR, smem = k.LDS + k.STS }
    per_kernel[i] = c
    rows[#rows + 1] = { n, c.total, c.ldg, c.shfl, c.bar, c.smem }
  end
  lab:table({ "kernel", "SASS instructions", "LDG", "SHFL", "BAR", "LDS+STS" }, rows)
  lab:record("sass", per_kernel)
  -- a taste of the machine code: the first instructions of the 4-warp layout
  local first = {}
  for j = 1, math.min(8, #sass_functions[names[3]]) do first[j] = sass_functions[names[3]][j].text end
  lab:note(names[3] .. " begins: " .. table.concat(first, " | "))
  local others_sync = true
  for i = 2, #per_kernel do if per_kernel[i].bar == 0 or per_kernel[i].smem == 0 then others_sync = false end end
  lab:verdict("data_exchange",
    string.format("BAR / LDS+STS: %s", (function()
      local parts = {}
      for i, c in ipairs(per_kernel) do parts[i] = string.format("%dw %d/%d", WARPS[i], c.bar, c.smem) end
      return table.concat(parts, ", ")
    end)()),
    per_kernel[1].total > 0 and per_kernel[1].bar == 0 and per_kernel[1].smem == 0 and others_sync)
else
  lab:note("SASS stage skipped: " .. tostring(first_sass):sub(1, 300))
  lab:verdict("data_exchange", "could not run: no disassembler (" .. tostring(first_sass):sub(1, 120) .. ")", nil)
end

-- ---------------------------------------------------------------------------------------------
-- The register cap: the same file compiled with -maxrregcount
lab:section("A register cap, as the compiler reports it")
local capped = cuda.compile(src, { name = "tile_reduce_capped.cu", arch = "sm_90a", std = "c++17",
  options = { "-maxrregcount=" .. P.reg_cap } })
local ptxas_capped = ptxas_report("--maxrregcount " .. P.reg_cap)
if ptxas_default and ptxas_capped and ptxas_default.many_live_values and ptxas_capped.many_live_values then
  local a, b = ptxas_default.many_live_values, ptxas_capped.many_live_values
  lab:note(string.format("ptxas: many_live_values uses %s registers, %s B spilled; "
    .. "capped at %d: %s registers, %s B spilled",
    tostring(a.regs), tostring(a.spill_stores), P.reg_cap, tostring(b.regs), tostring(b.spill_stores)))
end

lab:require_gpu()

-- ---------------------------------------------------------------------------------------------
lab:section("Stage 5: module load")
t = cuda.now()
local mod_jit = cuda.load(virt.ptx)
local load_ptx_ms = (cuda.now() - t) * 1e3
t = cuda.now()
local mod = cuda.load(prog)
local load_cubin_ms = (cuda.now() - t) * 1e3
lab:table({ "image", "load time" }, {
  { "PTX (driver JIT compiles it; its disk cache may answer)", string.format("%.2f ms", load_ptx_ms) },
  { "cubin (ready machine code)", string.format("%.2f ms", load_cubin_ms) },
})
lab:record("load", { ptx_ms = load_ptx_ms, cubin_ms = load_cubin_ms })
-- the driver's JIT runs the same ptxas: the registers it picks should match the cubin's
local jit_regs, cubin_regs = {}, {}
for i, nm in ipairs(names) do
  -- a module loaded from a plain PTX string knows only the lowered (mangled) names
  jit_regs[i], cubin_regs[i] = mod_jit:kernel(prog.lowered[nm]).regs, mod:kernel(nm).regs
end
lab:note(string.format("registers per layout: JIT from PTX %s; cubin from NVRTC %s", table.concat(jit_regs, "/"),
  table.concat(cubin_regs, "/")))

-- ---------------------------------------------------------------------------------------------
lab:section("One 1024-element tile, four execution layouts")
local n = P.tiles * TILE
local x = cuda.array("f32", n)
local seed = 0x9e37
mod:kernel("fill_tiles"):launch({ grid = (n + 255) // 256, block = 256 }, x, n, seed)

-- the same values on the CPU, for a sample of tiles
local function value(i)
  local h = ((i & 0xffffffff) * 2654435761 + seed) & 0xffffffff
  return ((h >> 16) % 129 - 64) * 0.125
end
local SAMPLE = math.min(P.tiles, 64)
local ref = {}
for tile = 0, SAMPLE - 1 do
  local s = 0.0
  for j = 0, TILE - 1 do s = s + value(tile * TILE + j) end
  ref[tile + 1] = s
end

local results, first, timed = {}, nil, {}
for i, w in ipairs(WARPS) do
  local k = mod:kernel(names[i])
  local sums = cuda.array("f32", P.tiles)
  sums:fill(1e30) -- poison: no tile sums to this, so an unwritten tile shows
  local cfg = { grid = P.tiles, block = 32 * w }
  local launch = function() k:launch(cfg, x, sums) end
  local b = harness.measure(launch, { regime = "cold", min_samples = P.reps, min_time = 0.05, timeout = 0.5 })
  b.label = w .. " warps"
  local h = cuda.host("f32", P.tiles)
  h:copy_from(sums)
  local ref_bad, unwritten = 0, 0
  for tile = 1, SAMPLE do if h[tile] ~= ref[tile] then ref_bad = ref_bad + 1 end end
  for tile = 1, P.tiles do if h[tile] > 1e29 then unwritten = unwritten + 1 end end
  local same = first and cuda.compare(h, first, { atol = 0, rtol = 0 }) or nil
  first = first or h
  results[#results + 1] = {
    warps = w, threads = 32 * w, per_thread = TILE // (32 * w), regs = k.regs, local_bytes = k.local_bytes,
    blocks_per_sm = (k:occupancy(32 * w, 0)), ms = b.mean, noise = b.noise, ci = b.ci95,
    gbs = n * 4 / (b.mean * 1e6), ref_bad = ref_bad, mismatches = same and same.mismatches or 0,
    unwritten = unwritten,
  }
  -- kept for the comparison below, which may measure again (the output is checked already)
  timed[#timed + 1] = { result = b, again = function()
    local r = harness.measure(launch, { regime = "cold", min_samples = P.reps, min_time = 0.05, timeout = 0.5 })
    r.label = b.label
    return r
  end, sums = sums }
end
local rows = {}
for _, r in ipairs(results) do
  rows[#rows + 1] = { r.warps, r.threads, r.per_thread, r.regs, r.local_bytes, r.blocks_per_sm,
    string.format("%.4f [%.4f, %.4f]", r.ms, r.ci[1], r.ci[2]), string.format("%.0f", r.gbs),
    string.format("%.2f%%", r.noise * 100), r.ref_bad, r.mismatches }
end
lab:table({ "warps", "threads", "elements/thread", "registers", "local B", "blocks/SM", "mean ms [95%]", "GB/s",
  "noise", "wrong vs CPU (sampled)", "differs from 1-warp" }, rows)
local layouts_json = {}
for i, r in ipairs(results) do
  layouts_json[i] = { warps = r.warps, per_thread = r.per_thread, regs = r.regs, local_bytes = r.local_bytes,
    blocks_per_sm = r.blocks_per_sm, ms = r.ms, ci95 = { r.ci[1], r.ci[2] }, noise = r.noise, gbs = r.gbs,
    ref_bad = r.ref_bad, mismatches = r.mismatches, unwritten = r.unwritten }
end
lab:record("layouts", layouts_json)

local all_same = true
for _, r in ipairs(results) do
  if r.ref_bad ~= 0 or r.mismatches ~= 0 or r.unwritten ~= 0 then all_same = false end
end
local differ, wrong, unwritten = 0, 0, 0
for _, r in ipairs(results) do
  differ, wrong, unwritten = differ + r.mismatches, wrong + r.ref_bad, unwritten + r.unwritten
end
lab:verdict("same_sum",
  string.format("%d tiles x %d layouts: %d sums differ from the 1-warp layout's, %d differ from the CPU's "
    .. "(%d tiles sampled per layout), %d left unwritten", P.tiles, #results, differ, wrong, SAMPLE, unwritten),
  all_same)
if not all_same then lab:fail("the layouts disagree: a kernel bug, not a layout effect") end

local regs_differ, fastest = false, results[1]
for _, r in ipairs(results) do
  if r.regs ~= results[1].regs then regs_differ = true end
  if r.ms < fastest.ms then fastest = r end
end
lab:verdict("layout_changes",
  (function()
    local parts = {}
    for _, r in ipairs(results) do
      parts[#parts + 1] = string.format("%dw: %d el/thr, %d regs", r.warps, r.per_thread, r.regs)
    end
    return table.concat(parts, "; ")
  end)(), regs_differ)
-- "more warps is faster" would need every doubling to pay off by more than 3%, decided from the
-- intervals: one doubling that is the same or slower proves the claim; all faster refutes it.
local pair_words, not_faster, all_faster, evidence = {}, false, true, { results = {} }
for i = 2, #timed do
  local d, _, _, det = lab:compare(timed[i].result, timed[i - 1].result, { margin = 0.03,
    remeasure = function() return timed[i].again(), timed[i - 1].again() end })
  pair_words[#pair_words + 1] = string.format("%dw vs %dw: %s (time ratio %.3f [%.3f, %.3f])", WARPS[i], WARPS[i - 1],
    d, det.ratio, det.ci[1], det.ci[2])
  if d == "same" or d == "slower" then not_faster = true end
  if d ~= "faster" then all_faster = false end
  evidence.results[#evidence.results + 1] = det.a
  if d == "unclear" then evidence.reason = det.reason end
end
for _, entry in ipairs(timed) do entry.sums:free() end
local more_holds
if not all_same then more_holds = nil
elseif not_faster then more_holds = true
elseif all_faster then more_holds = false end
if more_holds ~= nil then evidence.reason = nil end
lab:verdict("more_warps", string.format("fastest: %d warps (%.4f ms); %s", fastest.warps, fastest.ms,
  table.concat(pair_words, "; ")), more_holds, evidence)
lab:svg_bars { file = "compile_pipeline_layouts.svg",
  title = string.format("%d tiles of 1024 floats: time per layout", P.tiles),
  y_label = "mean ms (95% interval)", bars = (function()
    local bars = {}
    for _, r in ipairs(results) do
      bars[#bars + 1] = { label = r.warps .. " warps", value = r.ms, lo = r.ci[1], hi = r.ci[2] }
    end
    return bars
  end)() }

-- ---------------------------------------------------------------------------------------------
lab:section("A register cap forces spills")
local free_k = mod:kernel("many_live_values")
local capped_k = cuda.load(capped):kernel("many_live_values")
local SPILL_BLOCK, SPILL_GRID, ROUNDS = 128, 2 * cuda.device(0).sm_count, lab.quick and 64 or 256
local xin = cuda.array("f32", SPILL_GRID * SPILL_BLOCK * 64)
mod:kernel("fill_tiles"):launch({ grid = (xin.numel + 255) // 256, block = 256 }, xin, xin.numel, 7)
local outs, spill_rows = {}, {}
for _, v in ipairs { { "no cap", free_k }, { "-maxrregcount=" .. P.reg_cap, capped_k } } do
  local y = cuda.array("f32", SPILL_GRID * SPILL_BLOCK)
  local cfg = { grid = SPILL_GRID, block = SPILL_BLOCK }
  local b = harness.measure(function() v[2]:launch(cfg, xin, y, ROUNDS) end,
    { regime = "hot", min_samples = P.reps, min_time = 0.05, timeout = 0.5 })
  local h = cuda.host("f32", y.numel)
  h:copy_from(y)
  outs[#outs + 1] = h
  spill_rows[#spill_rows + 1] = { v[1], v[2].regs, v[2].local_bytes,
    string.format("%.4f [%.4f, %.4f]", b.mean, b.ci95[1], b.ci95[2]) }
  y:free()
end
lab:table({ "many_live_values", "registers", "local bytes/thread", "mean ms [95%]" }, spill_rows)
local same = cuda.compare(outs[1], outs[2], { atol = 0, rtol = 0 })
lab:verdict("spills",
  string.format("cap %d; uncapped: %d registers, %d local B; capped: %d registers, %d local B; results %s",
    P.reg_cap, free_k.regs, free_k.local_bytes, capped_k.regs, capped_k.local_bytes,
    same.mismatches == 0 and "identical" or (same.mismatches .. " differ")),
  capped_k.regs <= P.reg_cap and capped_k.local_bytes > 0 and free_k.local_bytes == 0)
if same.mismatches ~= 0 then lab:fail("spilling changed the results of many_live_values") end
xin:free()
x:free()
os.exit(lab:finish())

-- multi_gpu.lua — several GPUs in one machine: copies between them, and NCCL all-reduce.
--
-- The seed asks nothing about several GPUs: every claim here is the lab's own, and one quotes
-- the CUDA programming guide. What is measured, all with cuda.measure (hot regime: back-to-back
-- calls between two events on the stream of the device the work is ordered on):
--   * the copy bandwidth matrix: every ordered pair (a -> b) with cuMemcpyPeerAsync, first
--     before any peer access is enabled (the driver stages such copies), then with peer access
--     on; the diagonal is each GPU's own cuMemcpyDtoDAsync of the same size, the reference.
--     Bandwidth = bytes copied / time (each byte is read once and written once).
--   * NCCL all-reduce (f32 sum, one process driving every GPU, ncclCommInitAll) over message
--     sizes from 8 B to 4 GiB: algbw = bytes / time and busbw = algbw x 2(n-1)/n, the bus
--     bandwidth of nccl-tests. The time is rank 0's stream (a rank cannot finish before every
--     rank has contributed); comm:sync waits for every rank after each size.
-- With one GPU there is no pair and no collective: the lab says so, measures DtoD, exits 0.
-- NVLink multicast stays off (gpulab sets NCCL_NVLS_ENABLE=0 unless it was set).
local lab = require("gpulab.lab")

local L = lab.new {
  name = "multi_gpu",
  title = "Several GPUs: peer-copy bandwidth and NCCL all-reduce",
  claims = "the lab's own (the seed does not cover several GPUs)",
  params = {
    { name = "copy_bytes", default = 1 << 30, quick = 256 << 20, min = 1 << 20,
      help = "bytes of each copy of the matrix (well above the 60 MB L2)" },
    { name = "min_bytes", default = 8, help = "smallest all-reduce message (bytes, a multiple of 4)" },
    { name = "max_bytes", default = 4 << 30, help = "largest all-reduce message (bytes)" },
    { name = "step", default = 4, help = "factor between consecutive all-reduce sizes (2 or 4)" },
    { name = "min_time", default = 0.3, quick = 0.1, help = "seconds of samples per measurement" },
    { name = "min_samples", default = 10, quick = 5, help = "samples per measurement at least" },
    { name = "max_s", default = 15.0, quick = 5.0,
      help = "seconds one measurement may take at most (it stops earlier once its mean is known to 1%)" },
  },
}
local P = L.params
L:claim { id = "peer_helps", own = true, text = "with peer access enabled a copy between two GPUs no longer " ..
  "needs to be staged through the host and is therefore faster (CUDA programming guide, peer-to-peer copies)" }
L:claim { id = "peer_below_dtod", own = true,
  text = "a copy to another GPU, peer access on, is slower than the same copy within one GPU (DtoD)" }
L:claim { id = "symmetric", own = true,
  text = "peer-copy bandwidth is the same in both directions of a pair (within 5%)" }
L:claim { id = "busbw_levels_off", own = true, text = "NCCL all-reduce bus bandwidth grows with the message " ..
  "size and levels off: the largest messages run within 10% of the best busbw, the smallest below 10% of it" }

local function gbps(bytes, ms) return bytes / (ms * 1e-3) / 1e9 end
local function bw_of(bytes, r) -- GB/s, and its interval from the time interval
  return gbps(bytes, r.mean), gbps(bytes, r.ci95[2]), gbps(bytes, r.ci95[1])
end
local function bw_text(bytes, r)
  local m, lo, hi = bw_of(bytes, r)
  return string.format("%.1f [%.1f, %.1f]", m, lo, hi)
end
local function size_text(b)
  local units = { { 1 << 30, "GiB" }, { 1 << 20, "MiB" }, { 1 << 10, "KiB" } }
  for _, u in ipairs(units) do if b >= u[1] then return string.format("%g %s", b / u[1], u[2]) end end
  return string.format("%d B", b)
end

-- ---------------------------------------------------------------------------------------------
L:section("Setup")
if P.step ~= 2 and P.step ~= 4 then L:fail("--step must be 2 or 4"); os.exit(L:finish()) end
if P.min_bytes % 4 ~= 0 or P.min_bytes < 4 or P.max_bytes < P.min_bytes then
  L:fail("--min_bytes must be a multiple of 4 and at most --max_bytes"); os.exit(L:finish())
end
L:require_gpu()
local n = cuda.count()
local names = {}
for g = 0, n - 1 do names[#names + 1] = string.format("%d: %s", g, cuda.device(g).name) end
cuda.device(0)
L:note(string.format("%d GPU(s): %s", n, table.concat(names, "; ")))
local function measure(fn, stream)
  return lab.measure(fn, { regime = "hot", stream = stream, min_time = P.min_time, min_samples = P.min_samples,
    max_noise = 0.01, timeout = P.max_s })
end

-- ---------------------------------------------------------------------------------------------
L:section("Copy bandwidth matrix")
local bytes = P.copy_bytes
local count = bytes // 4
local src, dst, streams = {}, {}, {}
for g = 0, n - 1 do
  cuda.device(g)
  src[g], dst[g], streams[g] = cuda.array("f32", count), cuda.array("f32", count), cuda.stream { nonblocking = true }
  src[g]:fill(g + 1)
end
-- the fills ran on each device's legacy default stream, which the non-blocking streams the copies
-- are measured on do not wait for (and a -> b runs on b's stream): every device finishes first
for g = 0, n - 1 do
  cuda.device(g)
  cuda.sync { timeout = 60 }
end
cuda.device(0)

-- a -> b ordered on b's stream (b current)
local function copy_time(a, b)
  cuda.device(b)
  local from, to, s = src[a], dst[b], streams[b]
  local r = measure(function(st) to:copy_from(from, st) end, s)
  cuda.sync { timeout = 60 }
  return r
end

local dtod, staged, direct, access = {}, {}, {}, {}
local steps, step = n * n + n * (n - 1), 0
for g = 0, n - 1 do
  step = step + 1; L:progress(step, steps, "copies")
  dtod[g] = copy_time(g, g)
end
for a = 0, n - 1 do
  staged[a], direct[a], access[a] = {}, {}, {}
  for b = 0, n - 1 do
    if a ~= b then
      step = step + 1; L:progress(step, steps, "copies")
      staged[a][b] = copy_time(a, b) -- no peer access enabled yet in this process
    end
  end
end
for a = 0, n - 1 do
  for b = 0, n - 1 do
    if a ~= b then access[a][b] = cuda.peer(a, b).can end
  end
end
for a = 0, n - 1 do -- peer access on wherever the driver allows it, both directions
  for b = 0, n - 1 do
    if a ~= b and access[b][a] then
      cuda.device(b)
      cuda.peer(b, a, true)
    end
  end
end
for a = 0, n - 1 do
  for b = 0, n - 1 do
    if a ~= b and access[b][a] then
      step = step + 1; L:progress(step, steps, "copies")
      direct[a][b] = copy_time(a, b)
    end
  end
end
cuda.device(0)

local header = { "from \\ to (GB/s)" }
for b = 0, n - 1 do header[#header + 1] = "GPU " .. b end
local rows = {}
for a = 0, n - 1 do
  local row = { "GPU " .. a }
  for b = 0, n - 1 do
    if a == b then row[#row + 1] = "DtoD " .. bw_text(bytes, dtod[a])
    elseif direct[a][b] then row[#row + 1] = bw_text(bytes, direct[a][b])
    else row[#row + 1] = "no peer access" end
  end
  rows[#rows + 1] = row
end
L:note(string.format("%s per copy; cells: peer access on (the diagonal: the GPU's own DtoD); GB/s [95%% interval]",
  size_text(bytes)))
L:table(header, rows)
local srows = {}
for a = 0, n - 1 do
  local row = { "GPU " .. a }
  for b = 0, n - 1 do row[#row + 1] = a == b and "-" or bw_text(bytes, staged[a][b]) end
  srows[#srows + 1] = row
end
if n > 1 then
  L:note("the same copies before peer access was enabled (staged by the driver):")
  L:table(header, srows)
end

local matrix = {}
for a = 0, n - 1 do
  for b = 0, n - 1 do
    local r = a == b and dtod[a] or direct[a][b]
    matrix[#matrix + 1] = { from = a, to = b, kind = a == b and "dtod" or "peer", peer_access = a ~= b and access[b][a],
      gbps = r and gbps(bytes, r.mean) or nil, staged_gbps = a ~= b and gbps(bytes, staged[a][b].mean) or nil }
  end
end
L:record("copy_bytes", bytes)
L:record("copy_matrix", matrix)

for g = 0, n - 1 do src[g]:free(); dst[g]:free() end

if n < 2 then
  L:note("one GPU: no pair to copy between and no collective to run; the DtoD reference above is all this " ..
    "machine can show")
  L:judge_missing("needs at least 2 GPUs; this machine has 1")
  os.exit(L:finish())
end

-- Verdicts of the matrix: every pair decides (L:compare on the two times). A claim holds when every
-- pair came out as it says, is refuted when one pair decided the other way, else stays unclear.
local function tally() return { n = 0, against = {}, undecided = {} } end
local function tally_pair(t, pair, decision, want)
  t.n = t.n + 1
  if decision == want then return end
  local list = (decision == "unclear") and t.undecided or t.against
  list[#list + 1] = pair .. " " .. decision
end
local helps, below, sym = tally(), tally(), tally()
for a = 0, n - 1 do
  for b = 0, n - 1 do
    if a ~= b and direct[a][b] then
      local pair = a .. "->" .. b
      tally_pair(helps, pair, L:compare(direct[a][b], staged[a][b], { margin = 0.05 }), "faster")
      tally_pair(below, pair, L:compare(direct[a][b], dtod[b], { margin = 0.05 }), "slower")
      if a < b and direct[b][a] then
        tally_pair(sym, a .. "<->" .. b, L:compare(direct[a][b], direct[b][a], { margin = 0.05 }), "same")
      end
    end
  end
end
local function verdict(id, t, what)
  if t.n == 0 then return L:verdict(id, "no pair with peer access", nil) end
  local good = t.n - #t.against - #t.undecided
  local holds = nil
  if #t.against > 0 then holds = false elseif #t.undecided == 0 then holds = true end
  local notes = {}
  for _, x in ipairs(t.against) do notes[#notes + 1] = x end
  for _, x in ipairs(t.undecided) do notes[#notes + 1] = x end
  L:verdict(id, string.format("%d of %d pairs %s%s", good, t.n, what,
    #notes > 0 and ("; not: " .. table.concat(notes, ", ")) or ""), holds)
end
verdict("peer_helps", helps, "faster with peer access than staged")
verdict("peer_below_dtod", below, "slower than the destination's DtoD")
verdict("symmetric", sym, "the same both ways")

-- ---------------------------------------------------------------------------------------------
L:section("NCCL all-reduce")
local ok_nccl, why = cuda.nccl.available()
if not ok_nccl then
  L:note("NCCL is not available: " .. tostring(why))
  L:judge_missing("NCCL not available")
  os.exit(L:finish())
end
L:note(string.format("NCCL %s; NCCL_NVLS_ENABLE=%s", cuda.nccl.version(), tostring(os.getenv("NCCL_NVLS_ENABLE"))))
local devices = {}
for g = 0, n - 1 do devices[#devices + 1] = g end
local inited, comm = pcall(cuda.nccl.init, { devices = devices, timeout = 120 })
if not inited then
  L:fail("NCCL init over every GPU failed: " .. tostring(comm))
  L:judge_missing("the NCCL init failed")
  os.exit(L:finish())
end
local sizes = {}
local b = P.min_bytes
while b <= P.max_bytes do sizes[#sizes + 1] = b; b = b * P.step end
if sizes[#sizes] ~= P.max_bytes and P.max_bytes % 4 == 0 then sizes[#sizes + 1] = P.max_bytes end
local big = sizes[#sizes] // 4
local send, recv, cstreams = {}, {}, {}
for g = 0, n - 1 do
  cuda.device(g)
  send[g + 1], recv[g + 1] = cuda.array("f32", big), cuda.array("f32", big)
  send[g + 1]:fill(1)
  cstreams[g + 1] = streams[g]
end
-- as above: the all-reduce runs on the non-blocking streams, which do not wait for the fills
for g = 0, n - 1 do
  cuda.device(g)
  cuda.sync { timeout = 60 }
end
cuda.device(0)
local factor = 2 * (n - 1) / n
local points, prow, best = {}, {}, 0
for i, size in ipairs(sizes) do
  L:progress(i, #sizes, "all-reduce")
  local sv, rv = {}, {}
  for g = 1, n do sv[g], rv[g] = send[g]:view(1, size // 4), recv[g]:view(1, size // 4) end
  local r = measure(function() comm:all_reduce(sv, rv, { op = "sum", streams = cstreams }) end, cstreams[1])
  comm:sync { timeout = 120 }
  local alg, alg_lo, alg_hi = bw_of(size, r)
  local e = { bytes = size, time_ms = r.mean, ci95_ms = { r.ci95[1], r.ci95[2] }, algbw = alg, busbw = alg * factor,
    busbw_lo = alg_lo * factor, busbw_hi = alg_hi * factor, samples = r.samples }
  points[#points + 1] = e
  if e.busbw > best then best = e.busbw end
  prow[#prow + 1] = { size_text(size), string.format("%.4g", r.mean * 1e3),
    string.format("%.2f", alg), string.format("%.2f [%.2f, %.2f]", e.busbw, e.busbw_lo, e.busbw_hi) }
end
-- the result is checked once, at the largest size: every rank holds n (each contributed 1.0)
local check = math.min(4, big)
local h = cuda.host("f32", check)
for g = 1, n do
  cuda.device(g - 1)
  h:copy_from(recv[g]:view(1, check))
  for k = 1, check do
    if h[k] ~= n then L:fail(string.format("all-reduce result on GPU %d is %g, not %d", g - 1, h[k], n)) end
  end
end
cuda.device(0)
L:table({ "size", "time (us)", "algbw (GB/s)", "busbw (GB/s) [95% interval]" }, prow)
local saturation
for _, e in ipairs(points) do if not saturation and e.busbw >= 0.9 * best then saturation = e.bytes end end
L:note(string.format("busbw = algbw x 2(n-1)/n = algbw x %.3f (n = %d); best %.1f GB/s; first size within 10%% of " ..
  "it: %s", factor, n, best, saturation and size_text(saturation) or "none"))
L:record("allreduce", points)
L:record("busbw_best_gbps", best)
L:record("busbw_saturation_bytes", saturation)
local first, last = points[1], points[#points]
local levels = last.busbw_lo >= 0.9 * best and first.busbw_hi < 0.1 * best
L:verdict("busbw_levels_off", string.format("busbw %s: %.3g [%.3g, %.3g] GB/s, %s: %.1f [%.1f, %.1f] GB/s, best %.1f",
  size_text(first.bytes), first.busbw, first.busbw_lo, first.busbw_hi, size_text(last.bytes), last.busbw,
  last.busbw_lo, last.busbw_hi, best), levels)

local series = { { name = "busbw", points = {} }, { name = "algbw", points = {} } }
for _, e in ipairs(points) do
  series[1].points[#series[1].points + 1] = { e.bytes, e.busbw, lo = e.busbw_lo, hi = e.busbw_hi }
  series[2].points[#series[2].points + 1] = { e.bytes, e.algbw }
end
L:svg_lines { file = "multi_gpu_allreduce.svg", title = string.format("NCCL all-reduce (f32 sum) over %d GPUs", n),
  x_label = "message size (bytes)", y_label = "GB/s", log_x = true, series = series }
local bars = {}
for a = 0, n - 1 do
  for b2 = 0, n - 1 do
    local r = a == b2 and dtod[a] or direct[a][b2]
    if r then
      local m, lo, hi = bw_of(bytes, r)
      bars[#bars + 1] = { label = a == b2 and ("DtoD " .. a) or (a .. "->" .. b2), value = m, lo = lo, hi = hi }
    end
  end
end
L:svg_bars { file = "multi_gpu_copies.svg", title = "Copy bandwidth (GB/s), peer access on", bars = bars }
for g = 1, n do send[g]:free(); recv[g]:free() end
comm:free()
os.exit(L:finish())
